"""The study's ceiling probe hands critic-eval its settings model whole (no field-by-field copy)."""

from __future__ import annotations

import pytest

from lecritique.config import SpecError, parse_spec
from lecritique.config.probe import PROBE_DEFAULTS
from lecritique.critic_eval.config import CriticEvalSpec
from lecritique.critic_eval.from_run import probe_spec
from lecritique.study.config import CeilingSpec

RUN = {
    "name": "p",
    "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
    "policy": {"path": "/x"},
    "critic": {"context": "none"},
}


def _probed(**settings):
    return probe_spec(parse_spec(RUN), "/policy", "/critic", "vf", **settings)


def test_the_ceilings_settings_reach_critic_eval_unchanged():
    ceiling = CeilingSpec(tasks=5, group_size=3, states=7, continuations=9, position_edges=[2])
    spec = _probed(probe=ceiling, ranking_states=0, position_edges=ceiling.position_edges, seed=4)
    assert (spec.tasks, spec.group_size, spec.states, spec.continuations) == (5, 3, 7, 9)
    assert (spec.ranking_states, spec.position_edges, spec.seed, spec.split) == (0, [2], 4, "eval")


def test_without_a_probe_critic_eval_keeps_its_own_defaults():
    spec = _probed()
    assert spec.probe_settings() == PROBE_DEFAULTS["critic-eval"] != CeilingSpec().probe_settings()


@pytest.mark.parametrize("field", ["states", "continuations"])
def test_every_context_refuses_a_probe_of_one_naming_the_field(field):
    """One model, one set of bounds: K >= 2 and n >= 2 (a ceiling is a variance within and across states)."""
    with pytest.raises(ValueError, match=f"{field}\n.*greater than or equal to 2"):
        CeilingSpec(**{field: 1})
    with pytest.raises(ValueError, match=f"{field}\n.*greater than or equal to 2"):
        CriticEvalSpec.model_validate(
            {
                "policy": {"path": "/p"},
                "environment": RUN["environment"],
                "critics": [{"name": "vf", "critic": {}}],
                field: 1,
            }
        )
    with pytest.raises(SpecError, match=f"critic_probe.{field}"):
        parse_spec({**RUN, "critic_probe": {field: 1}})
