"""Fixtures of the integration tier, shared by its folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_policies import pipeline_policy
from tests.unit.critics.conftest import ascii_model, ascii_tokenizer  # noqa: F401  (the critics' random ASCII policy)


@pytest.fixture(scope="session")
def tiny_policy() -> Path:
    """The pipeline's tiny sudoku policy (:data:`tests.tiny_policies.PIPELINE`), one build per
    machine: it emits well-formed moves, solves some one- and two-cell puzzles and fails others,
    so rewards vary within groups."""
    return pipeline_policy()
