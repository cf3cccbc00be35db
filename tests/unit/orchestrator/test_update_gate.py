"""``critic.updates_per_step``: the evaluation stage waits for a critic k updates past the last one
used, gives up on a starved trainer (its data come with the next push, which needs this batch), and
each row reports the updates achieved."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

from lecritique.config import parse_spec
from lecritique.critics.types import ActorInfo
from lecritique.orchestrator.critic_stage import CriticStage
from lecritique.orchestrator.episodes import EpisodeBatch
from lecritique.orchestrator.update_gate import TrainerProgress, UpdateGate, update_gate
from lecritique.trajectory import Trajectory


@dataclass
class FakeTime:
    now: float = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Plane:
    """An evaluator serving ``served`` and a trainer that publishes one version per ``every`` seconds
    while its replay holds data for ``feeds`` more updates."""

    time: FakeTime
    served: int = 0
    feeds: int = 100
    every: float = 0.2
    depth: int = 64
    updates: int = 0
    last: float = 0.0
    down: bool = False
    asked: list[int] = field(default_factory=list)

    def _advance(self) -> None:
        while self.feeds > 0 and self.time.now - self.last >= self.every:
            self.last += self.every
            self.feeds -= 1
            self.updates += 1
            self.served += 1
        if self.feeds == 0:
            self.depth = 3

    def served_version(self) -> int:
        if self.down:
            raise grpc.RpcError()
        self._advance()
        self.asked.append(self.served)
        return self.served

    def progress(self) -> TrainerProgress:
        self._advance()
        return TrainerProgress(self.updates, self.depth, 0.01)


def gate(plane: Plane, k: int, publish_every: int = 1, wait: float = 60.0) -> UpdateGate:
    return UpdateGate(
        k, publish_every, 16, plane, plane.progress, wait, clock=plane.time.clock, sleep=plane.time.sleep
    )


def test_no_bound_without_a_previous_version_or_when_asynchronous():
    plane = Plane(FakeTime())
    assert gate(plane, 4).target(-1) is None
    assert gate(plane, 0).target(7) is None
    assert gate(plane, 4).target(7) == 11
    assert gate(plane, 4, publish_every=3).target(7) == 9  # two publishes make at least 6 >= 4 updates


def test_the_gate_waits_until_k_more_updates_are_served():
    time = FakeTime()
    plane = Plane(time)
    g = gate(plane, 4)
    g.consumed_through(0)
    assert g.wait(g.target(0) or 0, g.deadline(), previous_cursor=0) is None
    assert plane.served == 4 and time.now == pytest.approx(0.8, abs=0.06)


def test_a_starved_trainer_ends_the_wait_once_the_previous_batch_is_in_the_replay():
    time = FakeTime()
    plane = Plane(time, feeds=2)
    g = gate(plane, 4)
    # Not consumed yet: the data may still come, so the gate keeps waiting (here until the deadline).
    assert g.wait(4, time.now + 5.0, previous_cursor=3) == "waited orchestrator.rpc_deadline_seconds"
    assert time.now == pytest.approx(5.0, abs=0.06)
    g.consumed_through(3)
    start = time.now
    reason = g.wait(4, time.now + 60.0, previous_cursor=3)
    assert reason is not None and reason.startswith("critic starved: 3 replay entries < critic batch 16")
    assert time.now - start == pytest.approx(1.0, abs=0.06)


def test_an_unreachable_evaluator_ends_the_wait_at_once():
    time = FakeTime()
    plane = Plane(time, down=True)
    assert gate(plane, 4).wait(4, 60.0, 0) == "value plane unreachable (RpcError)"
    assert time.now == 0.0


def test_the_stage_scores_each_batch_k_updates_after_the_last_and_rescores_a_lagging_replica(monkeypatch):
    spec = parse_spec(
        {
            "name": "gate",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 1]},
            "policy": {"path": "/tmp"},
            "critic": {"context": "none", "updates_per_step": 2},
        }
    )
    time = FakeTime()
    plane = Plane(time, every=0.1)
    answers = iter([0, 1, 2, 4])  # the replica that answers the second batch still serves version 1 once

    class Evaluator:
        def served_version(self) -> int:
            return plane.served_version()

        def evaluate(self, queries, prompts, actor: ActorInfo):
            return [np.zeros(len(q.trajectory.token_ids), np.float32) for q in queries], next(answers), {}

    evaluator = Evaluator()
    g = update_gate(spec.critic, spec.critic_batch_size, evaluator, None, 60.0)
    assert (
        g is not None
        and update_gate(spec.critic.model_copy(update={"updates_per_step": 0}), 16, evaluator, None, 1.0)
        is None
    )
    g.clock, g.sleep = time.clock, time.sleep
    stage = CriticStage(spec.critic, evaluator, None, "/tmp", g)  # type: ignore[arg-type]
    monkeypatch.setattr(
        "lecritique.orchestrator.critic_stage.critic_queries",
        lambda *a: [SimpleNamespace(trajectory=t, context_text="", peers=[]) for t in a[1]],
    )
    monkeypatch.setattr(
        "lecritique.orchestrator.critic_stage.attempt_of", lambda record, trajectory: trajectory
    )
    trajectory = Trajectory(
        "t",
        "task",
        0,
        np.array([1]),
        np.array([2, 3]),
        np.array([True, True]),
        np.zeros(2),
        np.zeros(2),
        1.0,
        0,
    )
    episodes = EpisodeBatch([SimpleNamespace(prompt_text="p")], [trajectory])  # type: ignore[list-item]
    assert stage.score(episodes, 0).value_version == 0
    g.consumed_through(0)
    second = stage.score(episodes, 1)
    assert second.value_version == 2 and second.update_wait[1] is None
    g.consumed_through(1)
    assert stage.score(episodes, 2).value_version == 4
