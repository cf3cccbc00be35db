"""Batches of the experiment, in cursor order, produced ahead of the policy loop.

Two producer threads: a rollout stage (sample tasks, play K episodes per task) and an evaluation
stage (the critic's values, :mod:`lecritique.orchestrator.critic_stage`), so batch k+1 is
evaluated while batch k+2 is generated and batch k trains (value evaluation off the critical
path, Le Critique B.1). At most ``prefetch_batches + 1`` batches are in flight beyond the one
training; with ``prefetch_batches = 0`` each batch is produced on demand, strictly on-policy.
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
    ) -> None:
        self.spec = spec
        self.environment = environment
        self.player = player
        self.critic = critic
        self._stop = stop
        self._ready: queue.Queue[GeneratedBatch | BaseException] = queue.Queue()
        self._rolled: queue.Queue[RolledOut | BaseException] = queue.Queue()
        # Batches in flight ahead of the policy loop (rolling out, evaluating, or queued).
        self._in_flight = threading.Semaphore(spec.orchestrator.prefetch_batches + 1)
        self._producers: list[threading.Thread] = []
        self._held: GeneratedBatch | None = None

    def roll_out(self, cursor: int) -> RolledOut:
        """The batch at ``cursor``: its tasks are seeded by the cursor, so a resumed run samples the same."""
        rollout = self.spec.rollout
        start = time.perf_counter()
        tasks = self.environment.sample_tasks(
            rollout.tasks_per_step, "train", self.spec.seed * 1_000_003 + cursor
        )
        episodes = play_batch(
            self.player,
            tasks,
            rollout.group_size,
            first_group_id=cursor * rollout.tasks_per_step,
            seed=self.spec.seed * 7_919 + cursor * 104_729,
            trajectory_prefix=f"b{cursor}",
        )
        return RolledOut(cursor, episodes, time.perf_counter() - start)

    def evaluate(self, rolled: RolledOut) -> GeneratedBatch:
        started = time.perf_counter()
        scored = self.critic.score(rolled.episodes, rolled.cursor)
        window = (started, time.perf_counter())
        return GeneratedBatch(
            rolled.cursor, rolled.episodes, scored, rolled.rollout_seconds, window, time.time()
        )

    def hold(self, batch: GeneratedBatch) -> None:
        """Give ``batch`` back: the next :meth:`next` returns it (the warmup keeps one for step 1)."""
        self._held = batch

    def next(self, cursor: int) -> GeneratedBatch:
        """The batch at ``cursor`` (batches come strictly in order)."""
        if self._held is not None:
            held, self._held = self._held, None
            if held.cursor != cursor:
                raise RuntimeError(f"held batch out of order: expected cursor {cursor}, got {held.cursor}")
            return held
        if self.spec.orchestrator.prefetch_batches == 0:
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
