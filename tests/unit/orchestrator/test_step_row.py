"""The typed metrics row: per-bucket explained variance for every critic estimator, configuration warnings."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from lecritique.advantages import estimator_classes
from lecritique.config import parse_spec
from lecritique.config.findings import warning_texts
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.loop import Orchestrator
from lecritique.orchestrator.row import StepRow
from tests.unit.orchestrator.test_degraded_critic import GROUPS, K, _Batches, _Trainer

SUDOKU = {"kind": "sudoku", "size": 4, "empty_cells": [1, 1]}


def _spec(tmp_path, estimator: str, environment: dict[str, Any], critic: dict[str, Any] | None):
    return parse_spec(
        {
            "name": "rows",
            "environment": environment,
            "policy": {"path": str(tmp_path)},
            "rollout": {"group_size": K, "tasks_per_step": GROUPS, "sampling": {"max_tokens": 2}},
            "estimator": {"name": estimator},
            "critic": critic,
            "orchestrator": {"steps": 3, "prefetch_batches": 0},
        }
    )


def _rows(tmp_path, spec, degraded=frozenset()) -> list[dict[str, Any]]:
    clients = SimpleNamespace(
        policy_trainer=_Trainer(),
        value_evaluator=None,
        value_trainer=None,
        environment=None,
        rollout=SimpleNamespace(load_weights=lambda version, path: {"r0": object()}),
    )
    player = EpisodePlayer(None, None, SimpleNamespace(eos_token_id=0), None, None, 64)  # type: ignore[arg-type]
    orchestrator = Orchestrator(spec, clients, player, tmp_path, experiment_id="rows-test")  # type: ignore[arg-type]
    orchestrator.batches = _Batches(set(degraded))  # type: ignore[assignment]
    rows: list[dict[str, Any]] = []
    orchestrator.run(rows.append)
    return rows


@pytest.mark.parametrize("estimator", sorted(cls.name for cls in estimator_classes()))
def test_every_critic_estimator_reports_explained_variance_per_bucket(tmp_path, estimator):
    """Finding 4 of issue 27: on main only TETHER with buckets > 1 reported ``value_ev_bucket_{m}``."""
    uses_critic = next(cls for cls in estimator_classes() if cls.name == estimator).uses_critic
    spec = _spec(
        tmp_path, estimator, SUDOKU, {"kind": "frozen_llm", "hindsight": False} if uses_critic else None
    )
    assert spec.response_budget < 5  # the stand-in's 5-token responses reach past the first bucket
    rows = _rows(tmp_path, spec, degraded={1})
    buckets = [sorted(key for key in row if key.startswith("value_ev_bucket_")) for row in rows]
    if uses_critic:
        assert buckets[0] and buckets[2]
        assert buckets[1] == []  # a degraded batch carries no values
        assert all(-50 < rows[0][key] <= 1 for key in buckets[0])
    else:
        assert buckets == [[], [], []]


def test_rows_round_trip_and_keep_their_keys():
    row = StepRow(
        step=2,
        critic={"states": 4.0},
        estimator={"tether_rho": 0.1},
        value_ev_buckets={0: 0.5},
        policy={"loss": 1.0},
        policy_version=2,
        held_out={"eval_success": 0.5},
        train_seconds=1.0,
    )
    written = row.to_dict()
    assert {
        "critic_states",
        "tether_rho",
        "value_ev_bucket_0",
        "policy_loss",
        "policy_version",
        "eval_success",
    } <= written.keys()
    assert "warnings" not in written and "step_seconds" not in written
    assert StepRow.from_dict(written) == row


def test_lvrl_on_a_single_turn_task_warns_once_that_it_is_grpo(tmp_path, caplog):
    single = _spec(tmp_path, "lvrl", {"kind": "arithmetic"}, {"kind": "frozen_llm"})
    multi = _spec(tmp_path, "lvrl", {**SUDOKU, "empty_cells": [3, 4]}, {"kind": "frozen_llm"})
    assert warning_texts(multi) == []
    [warning] = warning_texts(single)
    assert "GRPO" in warning and "single-turn" in warning
    with caplog.at_level(logging.WARNING, logger="lecritique.orchestrator.loop"):
        rows = _rows(tmp_path, single)
    assert warning in caplog.text
    assert [row.get("warnings") for row in rows] == [[warning], None, None]
