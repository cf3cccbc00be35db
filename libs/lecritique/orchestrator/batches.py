"""Batches of the experiment, in cursor order, produced ahead of the policy loop.

Two producer threads: a rollout stage (sample tasks, play K episodes per task) and an evaluation
stage (the critic's values, :mod:`lecritique.orchestrator.critic_stage`), so batch k+1 is
evaluated while batch k+2 is generated and batch k trains (value evaluation off the critical
path, Le Critique B.1). At most ``prefetch_batches + 1`` batches are in flight beyond the one
training; with ``prefetch_batches = 0`` each batch is produced on demand, strictly on-policy.

A batch's tasks and sampling seeds come from its :class:`DrawStream` and its index there, nothing
else: the policy steps of every run of a seed draw the same batches whatever the estimator, and a
critic's warm-up draws from a stream of its own (:data:`WARMUP_DRAWS`), so it shifts none of them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from lecritique.config.experiment import ExperimentSpec
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.clients import EnvironmentClient
from lecritique.orchestrator.critic_stage import CriticStage, Scored
from lecritique.orchestrator.episodes import EpisodeBatch, play_batch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DrawStream:
    """Where a stream's batches draw from: batch ``index`` of experiment seed ``seed`` samples the
    same tasks with the same sampling seeds in every run."""

    name: str
    offset: int
    """Added to every seed and group id of the stream: streams never share a draw."""
    prefix: str
    """Trajectory ids ``{prefix}{index}-{group}-{member}``."""

    def task_seed(self, seed: int, index: int) -> int:
        return self.offset + seed * 1_000_003 + index

    def sampling_seed(self, seed: int, index: int) -> int:
        return self.offset + seed * 7_919 + index * 104_729

    def first_group_id(self, index: int, tasks_per_step: int) -> int:
        return self.offset + index * tasks_per_step


POLICY_DRAWS = DrawStream("policy", 0, "b")
"""The policy steps' batches (the orchestrator's ``cursor``)."""
WARMUP_DRAWS = DrawStream("warmup", 1 << 48, "w")
"""The critic warm-up's batches (the orchestrator's ``warmup_cursor``): pushed to the replay, never
trained on by the policy."""


@dataclass
class RolledOut:
    cursor: int
    episodes: EpisodeBatch
    rollout_seconds: float


@dataclass
class GeneratedBatch:
    cursor: int
    episodes: EpisodeBatch
    scored: Scored
    rollout_seconds: float
    evaluate_window: tuple[float, float]
    """``perf_counter`` start and end of this batch's evaluation: the policy loop's value wait is its
    blocked time inside this window."""
    evaluated_at: float = 0.0
    """Wall-clock time (``time.time``) the evaluation ended: when the value plane answered or was found down."""


class BatchSource:
    def __init__(
        self,
        spec: ExperimentSpec,
        environment: EnvironmentClient,
        player: EpisodePlayer,
        critic: CriticStage,
        stop: threading.Event,
        draws: DrawStream = POLICY_DRAWS,
        *,
        prefetch: int | None = None,
    ) -> None:
        """``prefetch``: batches queued ahead (None: ``orchestrator.prefetch_batches``; 0: each
        batch rolled out and evaluated on demand, in the caller's thread)."""
        self.spec = spec
        self.draws = draws
        self.prefetch = spec.orchestrator.prefetch_batches if prefetch is None else prefetch
        self.environment = environment
        self.player = player
        self.critic = critic
        self._stop = stop
        self._ready: queue.Queue[GeneratedBatch | BaseException] = queue.Queue()
        self._rolled: queue.Queue[RolledOut | BaseException] = queue.Queue()
        # Batches in flight ahead of the policy loop (rolling out, evaluating, or queued).
        self._in_flight = threading.Semaphore(self.prefetch + 1)
        self._producers: list[threading.Thread] = []

    def roll_out(self, cursor: int) -> RolledOut:
        """The batch at ``cursor`` of this source's stream: its tasks and sampling seeds are the
        stream's draw ``cursor``, so a resumed run samples the same."""
        rollout, seed, draws = self.spec.rollout, self.spec.seed, self.draws
        start = time.perf_counter()
        tasks = self.environment.sample_tasks(rollout.tasks_per_step, "train", draws.task_seed(seed, cursor))
        episodes = play_batch(
            self.player,
            tasks,
            rollout.group_size,
            first_group_id=draws.first_group_id(cursor, rollout.tasks_per_step),
            seed=draws.sampling_seed(seed, cursor),
            trajectory_prefix=f"{draws.prefix}{cursor}",
        )
        return RolledOut(cursor, episodes, time.perf_counter() - start)

    def evaluate(self, rolled: RolledOut) -> GeneratedBatch:
        started = time.perf_counter()
        scored = self.critic.score(rolled.episodes, rolled.cursor)
        window = (started, time.perf_counter())
        return GeneratedBatch(
            rolled.cursor, rolled.episodes, scored, rolled.rollout_seconds, window, time.time()
        )

    def next(self, cursor: int) -> GeneratedBatch:
        """The batch at ``cursor`` (batches come strictly in order)."""
        if self.prefetch == 0:
            return self.evaluate(self.roll_out(cursor))
        if not self._producers:
            self._producers = [
                threading.Thread(
                    target=self._produce_rollouts, args=(cursor,), name="rollout-stage", daemon=True
                ),
                threading.Thread(target=self._produce_evaluations, name="evaluation-stage", daemon=True),
            ]
            for thread in self._producers:
                thread.start()
        item = self._ready.get()
        if isinstance(item, BaseException):
            raise RuntimeError("batch generation failed") from item
        self._in_flight.release()
        if item.cursor != cursor:
            raise RuntimeError(f"batch producer out of order: expected cursor {cursor}, got {item.cursor}")
        return item

    def join(self, timeout: float = 60) -> None:
        """Wait for the producer threads (after the stop event was set)."""
        for thread in self._producers:
            thread.join(timeout=timeout)

    def _produce_rollouts(self, first_cursor: int) -> None:
        cursor = first_cursor
        try:
            while not self._stop.is_set():
                if not self._in_flight.acquire(timeout=0.2):
                    continue
                self._rolled.put(self.roll_out(cursor))
                cursor += 1
        except BaseException as error:  # surfaced in the consumer, through the evaluation stage
            if not self._stop.is_set():
                logger.exception("rollout stage failed")
                self._rolled.put(error)

    def _produce_evaluations(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    rolled = self._rolled.get(timeout=0.2)
                except queue.Empty:
                    continue
                if isinstance(rolled, BaseException):
                    self._ready.put(rolled)
                    return
                self._ready.put(self.evaluate(rolled))
        except BaseException as error:
            if not self._stop.is_set():
                logger.exception("evaluation stage failed")
                self._ready.put(error)
