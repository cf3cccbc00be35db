"""The registry and the EnvironmentConfig discriminated union."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lecritique.envs import (
    EnvironmentConfig,
    SudokuConfig,
    build_environment,
    environment_names,
    get_environment,
    parse_environment_config,
)
from tests.unit.envs.dataset_support import EXAMPLE_DATA

# Settings an environment cannot do without (every other environment builds from its defaults).
REQUIRED = {
    "dataset": {"path": str(EXAMPLE_DATA), "prompt_column": "question", "privileged_columns": ["solution"]}
}


class Spec(BaseModel):
    environment: EnvironmentConfig


def test_spec_embeds_the_union():
    spec = Spec.model_validate({"environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]}})
    assert isinstance(spec.environment, SudokuConfig)
    env = build_environment(spec.environment)
    assert env.name == "sudoku" and env.config.empty_cells == (3, 4)
    assert Spec.model_validate_json(spec.model_dump_json()) == spec


def test_every_field_has_a_docstring():
    for name in environment_names():
        config = parse_environment_config({"kind": name, **REQUIRED.get(name, {})})
        for field_name, field in type(config).model_fields.items():
            assert field.description, f"{name}.{field_name} has no docstring"


def test_unknown_names_and_fields_are_named():
    with pytest.raises(ValueError, match="unknown environment 'chess'"):
        get_environment("chess")
    with pytest.raises(ValueError, match=r"unknown field\(s\) colour, weight"):
        get_environment("arithmetic", colour=1, weight=2)
    with pytest.raises(ValueError, match="eval_fraction"):
        get_environment("countdown", eval_fraction=1.5)


def test_each_environment_declares_privileged_kinds_and_tasks_carry_them():
    for name in environment_names():
        env = get_environment(name, **REQUIRED.get(name, {}))
        assert env.privileged_kinds, name
        task = env.sample_tasks(1, seed=0)[0]
        assert set(task.privileged) == set(env.privileged_kinds), name
        assert all(isinstance(value, str) and value for value in task.privileged.values())
