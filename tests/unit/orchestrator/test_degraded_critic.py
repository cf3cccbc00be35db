"""The value plane is optional at run time: a batch it cannot score takes the leave-one-out baseline.

The policy loop runs here with in-process stand-ins for the rollout stage and the trainers; the
evaluator stand-ins fail the way a real one does (a real gRPC pool to a closed port, a real
DEADLINE_EXCEEDED from a hung server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY

from lecritique.advantages import AdvantageBatch, critic_free_advantages, get_estimator
from lecritique.config import parse_spec
from lecritique.critics.types import ActorInfo
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.batches import GeneratedBatch
from lecritique.orchestrator.clients import ValueEvaluatorClient
from lecritique.orchestrator.critic_stage import CriticStage, Scored
from lecritique.orchestrator.episodes import EpisodeBatch
from lecritique.orchestrator.loop import DegradedTooLong, Orchestrator
from lecritique.trajectory import Trajectory
from lecritique.v1 import policy_pb2

GROUPS, K = 3, 4


def _trajectory(row: int, rng: np.random.Generator, values: bool) -> Trajectory:
    n = 5
    return Trajectory(
        trajectory_id=f"t{row}",
        task_id=f"task{row // K}",
        group_id=row // K,
        prompt_ids=np.arange(3, dtype=np.int32),
        token_ids=np.arange(n, dtype=np.int32),
        policy_mask=np.ones(n, dtype=bool),
        logprobs=np.zeros(n, dtype=np.float32),
        step_ids=np.zeros(n, dtype=np.int32),
        reward=float(rng.integers(0, 2)),
        policy_version=0,
        values=rng.random(n).astype(np.float32) if values else None,
        value_version=3 if values else -1,
    )


def _batch(cursor: int, degraded: str | None) -> GeneratedBatch:
    rng = np.random.default_rng(cursor)
    trajectories = [_trajectory(row, rng, values=degraded is None) for row in range(GROUPS * K)]
    scored = Scored(trajectories, -1 if degraded else 3, 0.0, {}, (0.0, cursor + 1), degraded=degraded)
    return GeneratedBatch(cursor, EpisodeBatch([], trajectories), scored, 0.0, (0.0, 0.0))


@dataclass
class _Batches:
    degraded_cursors: set[int]

    def next(self, cursor: int) -> GeneratedBatch:
        return _batch(cursor, "evaluator UNAVAILABLE" if cursor in self.degraded_cursors else None)

    def join(self) -> None:
        pass


@dataclass
class _Trainer:
    steps: list[int] = field(default_factory=list)
    advantages: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def train(self, step: int, trajectories: list[Trajectory]) -> policy_pb2.TrainResponse:
        self.steps.append(step)
        self.advantages[step] = [t.advantages for t in trajectories]
        return policy_pb2.TrainResponse(policy_version=step, path=f"v{step}")


def _orchestrator(
    tmp_path, degraded: set[int], experiment_id: str = "degraded-test", **orchestrator: Any
) -> tuple[Orchestrator, _Trainer]:
    spec = parse_spec(
        {
            "name": "degraded",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 1]},
            "policy": {"path": str(tmp_path)},
            "rollout": {"group_size": K, "tasks_per_step": GROUPS},
            "estimator": {"name": "tether", "ema_decay": 0.5},
            "critic": {"context": "none", "warmup_updates": 0},
            "orchestrator": {"steps": 6, "prefetch_batches": 0, **orchestrator},
        }
    )
    trainer = _Trainer()
    clients = SimpleNamespace(
        policy_trainer=trainer,
        value_evaluator=None,
        value_trainer=None,
        environment=None,
        rollout=SimpleNamespace(load_weights=lambda version, path: {"r0": object()}),
    )
    player = EpisodePlayer(None, None, SimpleNamespace(eos_token_id=0), None, None, 64)  # type: ignore[arg-type]
    orchestrator_ = Orchestrator(spec, clients, player, tmp_path, experiment_id=experiment_id)  # type: ignore[arg-type]
    orchestrator_.batches = _Batches(degraded)  # type: ignore[assignment]
    return orchestrator_, trainer


def test_degraded_steps_use_the_loo_baseline_and_never_fit_rho(tmp_path):
    orchestrator, trainer = _orchestrator(tmp_path, degraded={2, 3})
    rows: list[dict[str, Any]] = []
    orchestrator.run(rows.append)
    assert trainer.steps == [1, 2, 3, 4, 5, 6]
    assert [row["critic_degraded"] for row in rows] == [0, 0, 1, 1, 0, 0]
    assert rows[2]["critic_degraded_reason"] == "evaluator UNAVAILABLE"
    for step in (3, 4):  # TETHER at rho = 0 is the leave-one-out baseline
        expected = critic_free_advantages(
            AdvantageBatch.from_trajectories(_batch(step - 1, "down").scored.trajectories)
        )
        np.testing.assert_allclose(np.stack(trainer.advantages[step]), expected, rtol=1e-6)
    # rho after the stretch is the one fitted on the last healthy batch, untouched by the degraded ones.
    reference = get_estimator("tether", ema_decay=0.5)
    for cursor in (0, 1, 4, 5):
        reference.freeze_and_fit(AdvantageBatch.from_trajectories(_batch(cursor, None).scored.trajectories))
    assert orchestrator.estimator.state_dict() == reference.state_dict()
    assert REGISTRY.get_sample_value("lecritique_critic_degraded", {"experiment": "degraded-test"}) == 0
    assert REGISTRY.get_sample_value("lecritique_degraded_steps_total", {"experiment": "degraded-test"}) == 2


def test_too_many_degraded_steps_stop_the_run_naming_the_field(tmp_path):
    orchestrator, trainer = _orchestrator(tmp_path, degraded={1, 2, 3, 4}, max_degraded_steps=2)
    with pytest.raises(DegradedTooLong, match="orchestrator.max_degraded_steps = 2"):
        orchestrator.run()
    assert trainer.steps == [1, 2, 3]


def test_max_degraded_steps_is_a_finite_documented_spec_field():
    from lecritique.config.experiment import OrchestratorSpec

    assert OrchestratorSpec().max_degraded_steps < 1000
    assert OrchestratorSpec.model_fields["max_degraded_steps"].description


def test_critic_free_fallback_is_tether_at_rho_zero_and_rloo():
    batch = AdvantageBatch.from_trajectories(_batch(7, None).scored.trajectories)
    np.testing.assert_allclose(
        critic_free_advantages(batch), get_estimator("tether").compute(batch), rtol=1e-6
    )
    np.testing.assert_allclose(critic_free_advantages(batch), get_estimator("rloo").compute(batch), rtol=1e-6)


# ---- the evaluation stage --------------------------------------------------------------------


def _stage(evaluator: ValueEvaluatorClient) -> CriticStage:
    spec = parse_spec(
        {
            "name": "stage",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 1]},
            "policy": {"path": "/tmp"},
            "critic": {"context": "none"},
        }
    )
    return CriticStage(spec.critic, evaluator, None, "/tmp")


def _plain_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The critic is shown each trajectory as is (what it is shown is tested in tests/critics)."""
    monkeypatch.setattr(
        "lecritique.orchestrator.critic_stage.critic_queries",
        lambda *a: [SimpleNamespace(trajectory=t, context_text="", peers=[]) for t in a[1]],
    )
    monkeypatch.setattr(
        "lecritique.orchestrator.critic_stage.attempt_of", lambda record, trajectory: trajectory
    )


def _episodes() -> EpisodeBatch:
    trajectories = _batch(0, "x").scored.trajectories
    return EpisodeBatch([SimpleNamespace(task=None, prompt_text="p")] * len(trajectories), trajectories)  # type: ignore[list-item]


def test_an_evaluator_serving_an_older_version_than_before_is_not_used(monkeypatch):
    answers = iter([7, 5, 8])

    class Evaluator:
        def evaluate(self, queries, prompts, actor: ActorInfo):
            return [np.zeros(len(q.trajectory.token_ids), np.float32) for q in queries], next(answers), {}

    stage = _stage(Evaluator())  # type: ignore[arg-type]
    _plain_queries(monkeypatch)
    results = [stage.score(_episodes()) for _ in range(3)]
    assert [r.degraded is None for r in results] == [True, False, True]
    assert [r.value_version for r in results] == [7, -1, 8]


@dataclass
class _ScoringBatches:
    """Batches scored by the orchestrator's own evaluation stage (what a restart must not forget)."""

    stage: CriticStage

    def next(self, cursor: int) -> GeneratedBatch:
        episodes = EpisodeBatch(_episodes().records, _batch(cursor, None).scored.trajectories)
        return GeneratedBatch(cursor, episodes, self.stage.score(episodes), 0.0, (0.0, 0.0))

    def join(self) -> None:
        pass


@dataclass
class _VersionedEvaluator:
    version: int

    def evaluate(self, queries, prompts, actor: ActorInfo):
        return [np.zeros(len(q.trajectory.token_ids), np.float32) for q in queries], self.version, {}


def _scoring_orchestrator(tmp_path, steps: int, evaluator_version: int) -> Orchestrator:
    orchestrator, _ = _orchestrator(tmp_path, degraded=set(), steps=steps)
    orchestrator.critic.evaluator = _VersionedEvaluator(evaluator_version)  # type: ignore[assignment]
    orchestrator.batches = _ScoringBatches(orchestrator.critic)  # type: ignore[assignment]
    return orchestrator


def test_a_restarted_orchestrator_still_refuses_an_older_critic_version(tmp_path, monkeypatch):
    """The newest critic version used is checkpointed with the estimator state: after an
    orchestrator restart, an evaluator that comes back serving an older version is not used."""
    _plain_queries(monkeypatch)
    before: list[dict[str, Any]] = []
    _scoring_orchestrator(tmp_path, steps=2, evaluator_version=7).run(before.append)
    assert [(row["critic_degraded"], row["value_version"]) for row in before] == [(0, 7), (0, 7)]

    after: list[dict[str, Any]] = []
    _scoring_orchestrator(tmp_path, steps=4, evaluator_version=5).run(after.append)
    assert [row["step"] for row in after] == [3, 4]
    assert all(row["critic_degraded"] for row in after), after
    assert after[0]["critic_degraded_reason"] == "critic version 5 older than 7"
