"""The evaluation stage: every trajectory of a batch is shown to the critic and gets its values.

What the critic is shown is :func:`lecritique.critics.inputs.critic_queries`'s; this stage adds
In-Context Conditioning (GenAC §5.1): who the actor is, and the smoothed average of its batch
rewards, into which a batch's own rewards are folded only after it was evaluated.

The critic is optional at run time: when the value plane cannot answer a batch within its
deadline (evaluator down, unreachable, hung) or answers with an older critic version than one it
already served, the batch is marked *degraded* (its reason in :attr:`Scored.degraded`) and carries
no values; the policy loop then uses the critic-free baseline for it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from lecritique.critics.icc import RewardAverage
from lecritique.critics.inputs import attempt_of, critic_queries
from lecritique.critics.prompts import describe_actor
from lecritique.critics.specs import ActorConditioning, CriticSpec
from lecritique.critics.types import ActorInfo
from lecritique.orchestrator.clients import ValueEvaluatorClient
from lecritique.orchestrator.episodes import EpisodeBatch
from lecritique.orchestrator.update_gate import POLL_SECONDS, UpdateGate
from lecritique.rpc.replica_pool import NoReplicaAvailable
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

_REQUEST_BUGS = frozenset(
    {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION}
)
"""Answers that say the request itself is wrong: a bug to surface, not a value plane to route around."""


@dataclass
class Scored:
    """A batch's trajectories with the critic's values and what it took."""

    trajectories: list[Trajectory]
    """With critic contexts and values attached (as played, when there is no critic)."""
    value_version: int
    """The critic version that produced the values (-1: no critic)."""
    seconds: float
    stats: dict[str, float]
    """The value evaluator's statistics (states scored, parse failures, LLM tokens and cost)."""
    reward_average_after: tuple[float, int]
    """The actor's reward average and its batch count once this batch is folded in (checkpointed)."""
    degraded: str | None = None
    """Why the value plane could not score this batch (None: it did); a degraded batch has no values."""
    update_wait: tuple[float, str | None] = (0.0, None)
    """``critic.updates_per_step``: seconds spent waiting for the critic's updates, and why the wait
    stopped short of them (None: it did not)."""


class CriticStage:
    def __init__(
        self,
        critic: CriticSpec | None,
        evaluator: ValueEvaluatorClient | None,
        tokenizer: object,
        policy_path: str | Path | None,
        gate: UpdateGate | None = None,
    ) -> None:
        self.critic = critic
        self.evaluator = evaluator
        self.gate = gate
        """Waits for ``critic.updates_per_step`` updates before each batch (None: asynchronous critic)."""
        # The evaluation stage encodes critic contexts while the rollout stage encodes prompts:
        # it gets a tokenizer of its own (a Rust-backed tokenizer must not be shared across threads).
        self.tokenizer = tokenizer
        conditioning = critic.actor_conditioning() if critic is not None else ActorConditioning()
        self.actor_description = conditioning.description or describe_actor(policy_path)
        self.reward_average = RewardAverage(
            conditioning.reward_average_decay, conditioning.initial_reward_average
        )
        self.newest_version = -1
        """The newest critic version that scored a batch: an evaluator that comes back serving an
        older one (e.g. restarted before the trainer's last publish reached it) is not used yet."""
        self.newest_cursor = -1
        """The batch cursor that version scored."""
        self.least_version = -1
        """The oldest critic version that may score the next batch (-1: any): the warmed-up critic,
        for the first policy step's batch; cleared once a batch is scored by it."""
        self.floor_seconds = 600.0
        """How long that version is waited for without a gate (``orchestrator.rpc_deadline_seconds``)."""

    def restore(self, average: float | None, batches: int, newest_version: int = -1) -> None:
        """Continue from a checkpointed reward average (None: none yet, keep the prior) and the
        newest critic version already used."""
        if average is not None:
            self.reward_average.value = average
            self.reward_average.batches = batches
        self.newest_version = max(self.newest_version, newest_version)

    def policy_stream_from(self, warmed_version: int) -> None:
        """The warm-up is over: the next batch (the policy stream's first) waits for ``warmed_version``,
        and the update gate counts the policy stream's cursors from here."""
        self.least_version = warmed_version
        self.newest_cursor = -1
        if self.gate is not None:
            self.gate.consumed = -1

    def score(self, episodes: EpisodeBatch, cursor: int = -1) -> Scored:
        scored = self._values(episodes, cursor)
        # Folded in after evaluation: no critic input ever contains its own batch's rewards.
        self.reward_average.update(float(np.mean([t.reward for t in episodes.trajectories])))
        scored.reward_average_after = (self.reward_average.value, self.reward_average.batches)
        return scored

    def _values(self, episodes: EpisodeBatch, cursor: int) -> Scored:
        trajectories = episodes.trajectories
        if self.evaluator is None or self.critic is None:
            return Scored(trajectories, -1, 0.0, {}, (0.0, 0))
        actor = ActorInfo(self.actor_description, self.reward_average.value)
        attempts = [attempt_of(r, t) for r, t in zip(episodes.records, trajectories, strict=True)]
        queries = critic_queries(self.critic, attempts, self.tokenizer, actor)
        start = time.perf_counter()
        try:
            values, version, stats, (waited, short, target) = self._evaluate(queries, episodes, actor)
        except (grpc.RpcError, NoReplicaAvailable) as error:
            if isinstance(error, grpc.RpcError) and error.code() in _REQUEST_BUGS:
                raise
            reason = error.code().name if isinstance(error, grpc.RpcError) else error.code.name
            logger.warning("value plane degraded (%s): scoring batch without the critic", reason)
            return self._degraded(trajectories, f"evaluator {reason}", time.perf_counter() - start)
        seconds = time.perf_counter() - start - waited
        if version < self.newest_version:
            logger.warning(
                "evaluator answered with critic version %d < %d already used", version, self.newest_version
            )
            return self._degraded(
                trajectories, f"critic version {version} older than {self.newest_version}", seconds
            )
        self.newest_version, self.newest_cursor = version, cursor
        if version >= self.least_version:
            self.least_version = -1
        if short is not None:
            logger.warning(
                "batch %d scored by critic version %d < %d wanted: %s", cursor, version, target, short
            )
        evaluated = [
            replace(q.trajectory, values=v, value_version=version)
            for q, v in zip(queries, values, strict=True)
        ]
        stats = {**stats, "reward_average": actor.reward_average}
        return Scored(evaluated, version, seconds, stats, (0.0, 0), update_wait=(waited, short))

    def _evaluate(
        self, queries: list[Any], episodes: EpisodeBatch, actor: ActorInfo
    ) -> tuple[list[Any], int, dict[str, float], tuple[float, str | None, int]]:
        """The evaluator's answer from a critic at least :attr:`least_version` and (``critic.updates_per_step``)
        the gate's target, each waited for until the deadline; and (seconds waited, why short, the version wanted)."""
        assert self.evaluator is not None
        start = time.perf_counter()
        gated = self.gate.target(self.newest_version) if self.gate is not None else None
        wanted = max(self.least_version, -1 if gated is None else gated)
        deadline = self.gate.deadline() if self.gate is not None else time.monotonic() + self.floor_seconds
        short: str | None = None
        while True:
            if self.least_version >= 0:
                short = self._await_served(self.least_version, deadline)
            if short is None and self.gate is not None and gated is not None:
                short = self.gate.wait(gated, deadline, self.newest_cursor)
            waited = time.perf_counter() - start if wanted >= 0 else 0.0
            values, version, stats = self.evaluator.evaluate(queries, episodes.prompt_texts, actor)
            # Another replica may still serve an older version than the one waited for.
            if short is not None or version >= wanted:
                return values, version, stats, (waited, short, wanted)

    def _await_served(self, version: int, deadline: float) -> str | None:
        """Wait until an evaluator serves ``version`` (published already: it comes); why it did not (None: it does)."""
        assert self.evaluator is not None
        while self.evaluator.served_version() < version:
            if time.monotonic() >= deadline:
                return f"critic version {version} (the warmed-up one) not served within the deadline"
            time.sleep(POLL_SECONDS)
        return None

    @staticmethod
    def _degraded(trajectories: list[Trajectory], reason: str, seconds: float) -> Scored:
        return Scored(trajectories, -1, seconds, {}, (0.0, 0), degraded=reason)
