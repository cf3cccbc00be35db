"""One policy step, top to bottom (Le Critique Appendix B).

The batch arrives rolled out, verified and valued: the producer threads of
:mod:`~lecritique.orchestrator.batches` run the rollout replicas, the environment verifier and the
critic's evaluation stage (:mod:`~lecritique.orchestrator.critic_stage`) ahead of the loop, so a
step reads:

1. **batch**: the next batch of finished groups; groups more than ``max_off_policy_steps`` policy
   versions old are dropped (:mod:`~lecritique.orchestrator.step_batch`);
2. **advantages**: frozen with the estimator's state fitted on *earlier* batches, then the state is
   fitted on this one for the next (TETHER's rho, EVPO's switch); without the critic when the value
   plane was down (the leave-one-out baseline), at the estimator's critic-free start while the
   critic warms up (:mod:`~lecritique.orchestrator.warmup`);
3. **replay**: the evaluated trajectories pushed to the critic's replay (evaluate-before-train);
4. **train**: the step recorded as pending, then sent to the policy trainer (exactly once across a
   restart: :mod:`~lecritique.orchestrator.state`);
5. **publish**: the new policy weights loaded into every rollout replica;
6. **measure and commit**: the held-out evaluation and the in-run critic probe when due, the step's
   metrics row (:mod:`~lecritique.orchestrator.telemetry`), the checkpoint.

:class:`PolicyStep` is the step's half of :class:`~lecritique.orchestrator.loop.Orchestrator`
(which builds the parts declared below); the loop's half is what happens around the steps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from lecritique.advantages import AdvantageBatch, AdvantageEstimator, critic_free_advantages
from lecritique.config.experiment import ExperimentSpec
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.batches import BatchSource, GeneratedBatch
from lecritique.orchestrator.clients import ServiceClients
from lecritique.orchestrator.critic_stage import CriticStage
from lecritique.orchestrator.heldout import evaluation_due, held_out_success
from lecritique.orchestrator.probe import CriticProbe
from lecritique.orchestrator.redis_retry import retry_redis
from lecritique.orchestrator.row import StepRow
from lecritique.orchestrator.state import CheckpointStore, OrchestratorState, PendingStep
from lecritique.orchestrator.step_batch import batch_row, fresh_trajectories
from lecritique.orchestrator.telemetry import StepLog, Telemetry
from lecritique.orchestrator.warmup import CriticWarmup
from lecritique.replay import ReplayBuffer
from lecritique.trajectory import Trajectory
from lecritique.v1 import policy_pb2

logger = logging.getLogger(__name__)

OnStep = Callable[[dict[str, Any]], None]


class DegradedTooLong(RuntimeError):
    """The value plane stayed down for more than ``orchestrator.max_degraded_steps`` policy steps."""


class PolicyStep:
    """One policy step over the orchestrator's parts (declared here, built by the Orchestrator)."""

    spec: ExperimentSpec
    clients: ServiceClients
    replay: ReplayBuffer[Trajectory] | None
    checkpoints: CheckpointStore
    log: StepLog
    telemetry: Telemetry
    estimator: AdvantageEstimator
    warnings: list[str]
    critic: CriticStage
    warmup: CriticWarmup
    batches: BatchSource
    probe: CriticProbe | None
    pin_critic: Callable[[int], bool] | None
    _stop: threading.Event
    _eval_player: EpisodePlayer
    _clock: Callable[[], float]
    _started: float
    _elapsed_before: float

    def _policy_step(self, state: OrchestratorState, on_step: OnStep | None) -> OrchestratorState:
        step = state.completed_step + 1
        step_start = time.perf_counter()
        batch = self.batches.next(state.cursor)
        wait_end = time.perf_counter()
        self._pin_scoring_critic(batch.scored.value_version)
        limit = self.spec.orchestrator.max_off_policy_steps
        evaluated, dropped = fresh_trajectories(batch, state.policy_version, limit)
        if dropped:
            self.telemetry.dropped(dropped)
        if not evaluated:
            logger.warning("step %d: every rollout of batch %d was stale; sampling again", step, batch.cursor)
            self._consumed(batch)
            return self._past(state, batch, dropped_stale_total=state.dropped_stale_total + dropped)
        degraded_streak = self._degraded_streak(state, batch, step)
        state = self.warmup.note(state, step)
        critic_warm = self.warmup.is_warm(state, batch.scored.value_version)
        advantage_batch = AdvantageBatch.from_trajectories(evaluated)
        advantages, estimator_metrics = self._advantages(batch, advantage_batch, critic_warm)
        with_advantages = [
            replace(t, advantages=advantages[row, : len(t.token_ids)]) for row, t in enumerate(evaluated)
        ]
        if batch.scored.degraded is None:  # only batches that carry values feed the critic
            self._push_replay(with_advantages)
        self._consumed(batch)
        metrics = batch_row(
            self.spec,
            self.estimator,
            state,
            batch,
            advantage_batch,
            step=step,
            dropped=dropped,
            waited=(step_start, wait_end),
            estimator_metrics=estimator_metrics,
        )
        metrics.critic_warm = critic_warm if self.estimator.uses_critic else None
        if state.completed_step == 0:
            metrics.warnings = list(self.warnings)
        state_after = self._past(
            state,
            batch,
            completed_step=step,
            estimator=self.estimator.state_dict(),
            dropped_stale_total=state.dropped_stale_total + dropped,
            degraded_streak=degraded_streak,
        )
        new_state, row = self._train(PendingStep(step, with_advantages, state_after, metrics), step_start)
        self.telemetry.step(row)
        if on_step is not None:
            on_step(row.to_dict())
        return new_state

    def _advantages(
        self, batch: GeneratedBatch, advantage_batch: AdvantageBatch, critic_warm: bool
    ) -> tuple[Any, dict[str, Any]]:
        """Frozen advantages and the estimator's metrics; without the critic when the value plane was
        down, at the estimator's critic-free starting state while the critic warms up.

        A degraded batch uses the leave-one-out baseline, and a cold one the estimator's starting
        state (TETHER's rho_0 = 0: leave-one-out too); neither is used to fit the estimator's state
        (TETHER's rho, EVPO's switch), which a cold critic's values would only mislead."""
        if not self.estimator.uses_critic:
            return self.estimator.freeze_and_fit(advantage_batch)
        if batch.scored.degraded is not None:
            return critic_free_advantages(advantage_batch), {}
        if not critic_warm:
            used = self.estimator.metrics()
            return self.estimator.compute(advantage_batch), self.estimator.report(used, used)
        return self.estimator.freeze_and_fit(advantage_batch)

    def _degraded_streak(self, state: OrchestratorState, batch: GeneratedBatch, step: int) -> int:
        """Consecutive degraded steps including this one; stops the run past ``max_degraded_steps``."""
        if batch.scored.degraded is None or not self.estimator.uses_critic:
            return 0
        streak = state.degraded_streak + 1
        limit = self.spec.orchestrator.max_degraded_steps
        logger.warning(
            "step %d degraded (%s): leave-one-out baseline, %d/%d", step, batch.scored.degraded, streak, limit
        )
        if streak > limit:
            raise DegradedTooLong(
                f"the value plane has been down for {streak} consecutive policy steps (last: {batch.scored.degraded}), "
                f"more than orchestrator.max_degraded_steps = {limit}; restore the value-evaluator or raise that field"
            )
        return streak

    def _consumed(self, batch: GeneratedBatch) -> None:
        """Tell the evaluation stage's update gate the batch is in the replay (or never will be)."""
        if self.critic.gate is not None:
            self.critic.gate.consumed_through(batch.cursor)

    def _train(self, pending: PendingStep, step_start: float) -> tuple[OrchestratorState, StepRow]:
        """Record the step as pending, train on it, then finish it."""
        train_start = time.perf_counter()
        self.checkpoints.save_pending(pending)
        response = self.clients.policy_trainer.train(pending.step, pending.trajectories)
        metrics = pending.metrics
        metrics.train_seconds = time.perf_counter() - train_start
        metrics.step_seconds = time.perf_counter() - step_start
        metrics.seconds = self._elapsed()
        state_after = replace(pending.state_after, elapsed_seconds=metrics.seconds)
        return self._finish_step(
            PendingStep(pending.step, pending.trajectories, state_after, metrics), response
        )

    def _finish_step(
        self, pending: PendingStep, response: policy_pb2.TrainResponse, *, recovering: bool = False
    ) -> tuple[OrchestratorState, StepRow]:
        """Load the new weights everywhere, log the step, commit the checkpoint."""
        results = self.clients.rollout.load_weights(response.policy_version, response.path)
        failures = {address: r for address, r in results.items() if isinstance(r, Exception)}
        if len(failures) == len(results):
            raise RuntimeError(
                f"no rollout replica loaded policy version {response.policy_version}: {failures}"
            )
        state = replace(
            pending.state_after, policy_version=int(response.policy_version), policy_path=response.path
        )
        metrics = replace(
            pending.metrics, policy=dict(response.metrics), policy_version=int(response.policy_version)
        )
        if evaluation_due(self.spec, pending.step, state):
            held_out = held_out_success(
                self._eval_player,
                self.clients.environment,
                self.spec.orchestrator.eval_tasks,
                self.spec.seed,
                pending.step,
            )
            self.telemetry.held_out(held_out["eval_success"])
            metrics.held_out = held_out
        if self.probe is not None and self.probe.due(pending.step):
            probed = self.probe.run(pending.step)
            self.telemetry.probed(pending.step, probed)
            metrics.probe = probed
        # A crash between appending the row and committing the checkpoint must not log the step twice.
        if not (recovering and self.log.has_step(pending.step)):
            self.log.append(metrics.to_dict())
        self.checkpoints.save(state)
        self.checkpoints.clear_pending()
        self.telemetry.finished(pending.step, int(response.policy_version))
        return state, metrics

    # ---- helpers -------------------------------------------------------------------------
    @staticmethod
    def _past(
        state: OrchestratorState, batch: GeneratedBatch, *, stream: str = "cursor", **changes: Any
    ) -> OrchestratorState:
        """``state`` once ``batch`` is consumed: the next cursor of its ``stream`` (``cursor`` or
        ``warmup_cursor``), the reward average and the newest critic version including it."""
        average, batches = batch.scored.reward_average_after
        newest = max(state.newest_value_version, batch.scored.value_version)
        changes = {stream: batch.cursor + 1, **changes}
        return replace(
            state,
            reward_average=average,
            reward_average_batches=batches,
            newest_value_version=newest,
            **changes,
        )

    def _pin_scoring_critic(self, version: int) -> None:
        """Keep the critic version that scored this step's batch in the weight store until a later
        step pins its own: the in-run record (and the study's ceiling probe) name the critic a step
        used, and the value trainer goes on publishing (and pruning) through the final evaluation."""
        if self.pin_critic is None or version < 0:
            return
        try:
            if not self.pin_critic(version):
                logger.info("critic version %d was pruned before this step could pin it", version)
        except OSError as error:  # a pin is bookkeeping: it never stops a step
            logger.warning("could not pin critic version %d: %s", version, error)

    def _push_replay(self, trajectories: list[Trajectory]) -> None:
        if self.replay is None:
            return
        replay = self.replay
        versions = [t.policy_version for t in trajectories]
        retry_redis(
            lambda: replay.push(trajectories, policy_version=versions),
            self.spec.orchestrator.service_down_seconds,
            "replay push",
        )

    def _elapsed(self) -> float:
        """Experiment wall time: what earlier orchestrator processes spent plus this one's."""
        return self._elapsed_before + (self._clock() - self._started)
