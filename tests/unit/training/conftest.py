"""Fixtures of the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.training.training_helpers import save_tiny_llama


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama saved as a HF directory, shared by the session (read-only)."""
    return save_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))
