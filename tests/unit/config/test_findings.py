"""config.findings: one list of what the platform says about a spec (issue 40), each finding
naming its field and level; errors are what validation refuses, with the same texts."""

from __future__ import annotations

from typing import Any

import pytest

from lecritique.config import SpecError, parse_spec
from lecritique.config.findings import Finding, spec_findings, warning_texts

BASE: dict[str, Any] = {
    "name": "base",
    "environment": {"kind": "sudoku"},
    "policy": {"path": "/models/tiny"},
    "estimator": {"name": "tether"},
    "critic": {"context": "reference"},
    "orchestrator": {"steps": 10},
}


@pytest.mark.parametrize(
    ("sections", "field", "text"),
    [
        ({"estimator": {"name": "value"}, "critic": None}, "critic", "needs a critic"),
        (
            {"estimator": {"name": "rloo"}, "critic": None, "rollout": {"group_size": 1}},
            "rollout.group_size",
            ">= 2",
        ),
        (
            {
                "estimator": {"name": "value"},
                "critic": {"context": "loo_group"},
                "rollout": {"group_size": 1},
            },
            "rollout.group_size",
            "the group's other members",
        ),
        (
            {
                "critic": {"context": "reference", "replay": {"capacity": 16}},
                "rollout": {"tasks_per_step": 8},
            },
            "critic.replay.capacity",
            "exceeds critic.replay.capacity",
        ),
        (
            {"critic": {"context": "reference", "updates_per_step": 50}},
            "critic.updates_per_step",
            "cannot be met",
        ),
    ],
)
def test_each_refusal_is_an_error_finding_and_the_validation_error(
    sections: dict[str, Any], field: str, text: str
) -> None:
    data = {**BASE, **sections}
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    assert text in str(refused.value)


def test_warnings_name_their_fields_and_come_after_errors() -> None:
    spec = parse_spec(
        {**BASE, "orchestrator": {"steps": 10, "eval_every": 20}, "critic_probe": {"every": 30}}
    )
    found = spec_findings(spec)
    assert [(f.field, f.level) for f in found] == [
        ("orchestrator.eval_every", "warning"),
        ("critic_probe.every", "warning"),
    ]
    assert warning_texts(spec) == [str(f) for f in found]
    assert spec_findings(parse_spec(BASE)) == []


def test_lvrl_on_a_single_turn_task_is_a_warning_on_the_estimator() -> None:
    spec = parse_spec(
        {
            **BASE,
            "environment": {"kind": "arithmetic"},
            "estimator": {"name": "lvrl"},
            "critic": {"kind": "frozen_llm"},
        }
    )
    [finding] = spec_findings(spec)
    assert finding == Finding("estimator.name", "warning", finding.text) and "GRPO" in finding.text
