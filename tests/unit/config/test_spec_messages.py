"""Spec errors as a person reads them (issue 30): the path as the YAML spells it, and for an
unknown field the nearest known name and every known one."""

from __future__ import annotations

from pathlib import Path

import pytest

from lecritique.config import SpecError, load_spec

SPEC = """\
name: typo
policy: {tiny: sudoku}
environment:
  kind: dataset
  path: problems.jsonl
  verifier: {kind: exactt}
  prompt_colum: question
rollout: {tasks_per_steps: 2}
"""


@pytest.fixture
def message(tmp_path: Path) -> str:
    (tmp_path / "spec.yaml").write_text(SPEC)
    with pytest.raises(SpecError) as error:
        load_spec(tmp_path / "spec.yaml")
    return str(error.value)


def test_paths_are_the_yamls_without_the_unions_tag(message: str) -> None:
    assert "  environment.verifier: Input tag 'exactt'" in message
    assert "environment.dataset." not in message


def test_an_unknown_field_gets_the_nearest_name_and_the_known_ones(message: str) -> None:
    assert (
        "rollout.tasks_per_steps: unknown field 'tasks_per_steps'; did you mean 'tasks_per_step'? "
        "(known: engine, group_size, replicas, sampling, tasks_per_step)"
    ) in message
    line = next(line for line in message.splitlines() if "prompt_colum" in line)
    assert line.startswith(
        "  environment.prompt_colum: unknown field 'prompt_colum'; did you mean 'prompt_column'? (known: "
    )
    assert "verifier" in line and "kind" in line


def test_a_nested_unions_fields_are_its_alternatives(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC.replace("{kind: exactt}", "{kind: exact, case_sensitiv: true}"))
    with pytest.raises(
        SpecError,
        match=r"environment\.verifier\.case_sensitiv: unknown field 'case_sensitiv'; "
        r"did you mean 'case_sensitive'\? \(known: case_sensitive, kind, strip_punctuation\)",
    ):
        load_spec(tmp_path / "spec.yaml")
