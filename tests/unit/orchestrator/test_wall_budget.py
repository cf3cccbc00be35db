"""``orchestrator.max_seconds``: arms compared at equal wall time (issue 39 §5).

The policy loop runs in-process (the harness of ``test_warmup_stream``) on a clock that advances
one second per policy update: with a budget of 2.5 s and 100 steps, the run must end after step
3 (the first whose end is past the budget), say so in its checkpoint, and be finished for a
resumed run and the launcher alike (no further step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lecritique.config import SpecError, parse_spec
from lecritique.engines.base import SamplingParams
from lecritique.envs import get_environment
from lecritique.episodes import EpisodePlayer
from lecritique.models.char_tokenizer import build_char_tokenizer
from lecritique.models.templates import PlainTemplate
from lecritique.orchestrator.loop import Orchestrator
from lecritique.run_folder import RunFolder
from lecritique.v1 import policy_pb2
from tests.unit.orchestrator.test_warmup_stream import _Environment, _Sampler

BUDGET, STEPS = 2.5, 100


@dataclass
class _SlowPolicyTrainer:
    """Each update takes one second of the test's clock."""

    steps: list[int] = field(default_factory=list)
    clock: float = 0.0

    def train(self, step: int, trajectories: list[Any]) -> policy_pb2.TrainResponse:
        self.clock += 1.0
        self.steps.append(step)
        return policy_pb2.TrainResponse(policy_version=step, path=f"v{step}")


def _orchestrator(out: Path, trainer: _SlowPolicyTrainer, max_seconds: float | None) -> Orchestrator:
    spec = parse_spec(
        {
            "name": "budget",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
            "policy": {"path": str(out)},
            "rollout": {"group_size": 2, "tasks_per_step": 2},
            "estimator": {"name": "mean"},
            "orchestrator": {"steps": STEPS, "max_seconds": max_seconds},
        }
    )
    environment = _Environment(get_environment("sudoku", size=4, empty_cells=[1, 2]))
    tokenizer = build_char_tokenizer([chr(c) for c in range(32, 127)] + ["\n"])
    player = EpisodePlayer(
        _Sampler(int(tokenizer.eos_token_id)),
        environment,
        tokenizer,
        PlainTemplate(),
        SamplingParams(max_tokens=4),
        4096,
        max_turns=2,
    )
    clients = SimpleNamespace(
        policy_trainer=trainer,
        value_evaluator=None,
        value_trainer=None,
        environment=environment,
        rollout=SimpleNamespace(load_weights=lambda version, path: {"r0": object()}),
    )
    orchestrator = Orchestrator(spec, clients, player, out, experiment_id="budget")  # type: ignore[arg-type]
    orchestrator._clock = lambda: trainer.clock
    return orchestrator


def test_the_run_ends_after_the_step_that_spent_the_budget_and_stays_finished(tmp_path: Path) -> None:
    trainer = _SlowPolicyTrainer()
    rows: list[dict[str, Any]] = []
    state = _orchestrator(tmp_path, trainer, BUDGET).run(rows.append)
    seconds = [row["seconds"] for row in rows if "seconds" in row]
    assert state.wall_budget_spent and state.completed_step == 3
    assert trainer.steps == [1, 2, 3] and seconds == [1.0, 2.0, 3.0]
    recorded = json.loads((tmp_path / "orchestrator" / "state.json").read_text())
    assert recorded["wall_budget_spent"] is True
    assert RunFolder(tmp_path).finished_step(STEPS) == state.completed_step

    again = _SlowPolicyTrainer()
    resumed = _orchestrator(tmp_path, again, BUDGET).run(rows.append)
    assert again.steps == [] and resumed.completed_step == state.completed_step


def test_without_a_budget_a_run_short_of_its_steps_is_not_finished(tmp_path: Path) -> None:
    (tmp_path / "orchestrator").mkdir()
    (tmp_path / "orchestrator" / "state.json").write_text(json.dumps({"completed_step": 3}))
    assert RunFolder(tmp_path).finished_step(STEPS) is None
    assert RunFolder(tmp_path).finished_step(3) == 3


@pytest.mark.parametrize("seconds", [0, -5])
def test_a_budget_must_be_positive(seconds: float) -> None:
    with pytest.raises(SpecError, match="orchestrator.max_seconds"):
        parse_spec(
            {
                "name": "budget",
                "environment": {"kind": "sudoku", "size": 4},
                "policy": {"path": "/x"},
                "orchestrator": {"max_seconds": seconds},
            }
        )
