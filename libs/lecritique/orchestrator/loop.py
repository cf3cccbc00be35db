"""The experiment loop of one experiment (Le Critique Appendix B).

Per policy step k:

1. take the next batch of finished groups (rolled out and evaluated ahead of the loop by
   :mod:`~lecritique.orchestrator.batches`; each trajectory's critic context and values come from
   the evaluation stage, :mod:`~lecritique.orchestrator.critic_stage`), drop groups with
   rollouts more than ``max_off_policy_steps`` policy versions old;
2. freeze the advantages with the estimator's state fitted on *earlier* batches, then fit its
   state on this batch (TETHER's rho, EVPO's explained variance) for the next one;
3. push the evaluated trajectories to the replay stream (evaluate-before-train);
4. record the step as pending, send it to the policy trainer, load the published weights into
   every rollout replica, run the held-out evaluation when due, append the step's metrics
   (:mod:`~lecritique.orchestrator.telemetry`), commit the checkpoint
   (:mod:`~lecritique.orchestrator.state`). With ``eval_every``, the initial policy is evaluated
   once first: the row of step 0 (:func:`~lecritique.orchestrator.heldout.initial_row`).

The critic's warm-up (``critic.warmup_updates`` value updates before its values are used) holds
the policy back only where the estimator needs the critic for its first step (``value``, ``gae``,
or ``critic.warmup: blocking``): the loop then only generates, evaluates and pushes batches from a
stream of their own (``warmup_cursor``), one at a time, until the value trainer reports the
updates, and the first policy step's batch is scored by that warmed-up version. An estimator that
is its own critic-free baseline at its starting state (TETHER at rho = 0, EVPO:
``steps_while_critic_warms``) takes policy steps at once; until a batch is scored by the version
published after the warm-up's updates it uses that starting state and fits nothing (the row's
``critic_warm`` is False), then the critic as usual. Either way the policy steps of a seed draw the
same batches in every arm (paired arms).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lecritique.advantages import (
    AdvantageBatch,
    AdvantageEstimator,
    critic_free_advantages,
)
from lecritique.config.experiment import ExperimentSpec
from lecritique.config.findings import warning_texts
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.batches import WARMUP_DRAWS, BatchSource, GeneratedBatch
from lecritique.orchestrator.clients import ServiceClients
from lecritique.orchestrator.critic_stage import CriticStage
from lecritique.orchestrator.heldout import evaluation_due, held_out_success, initial_row
from lecritique.orchestrator.probe import in_run_probe
from lecritique.orchestrator.redis_retry import retry_redis
from lecritique.orchestrator.row import StepRow
from lecritique.orchestrator.state import CheckpointStore, OrchestratorState, PendingStep, wall_budget_spent
from lecritique.orchestrator.step_batch import batch_row, fresh_trajectories
from lecritique.orchestrator.telemetry import StepLog, Telemetry
from lecritique.orchestrator.update_gate import update_gate
from lecritique.orchestrator.warmup import CriticWarmup
from lecritique.replay import ReplayBuffer
from lecritique.run_folder import RunFolder
from lecritique.trajectory import Trajectory
from lecritique.v1 import policy_pb2

logger = logging.getLogger(__name__)

OnStep = Callable[[dict[str, Any]], None]


class DegradedTooLong(RuntimeError):
    """The value plane stayed down for more than ``orchestrator.max_degraded_steps`` policy steps."""


class Orchestrator:
    def __init__(
        self,
        spec: ExperimentSpec,
        clients: ServiceClients,
        player: EpisodePlayer,
        out_dir: Path,
        *,
        experiment_id: str,
        replay: ReplayBuffer[Trajectory] | None = None,
        metrics_sink: OnStep | None = None,
    ) -> None:
        self.spec = spec
        self.clients = clients
        self.replay = replay
        self.checkpoints = CheckpointStore(RunFolder(Path(out_dir)).checkpoint_dir)
        self.log = StepLog(RunFolder(Path(out_dir)).metrics_path, metrics_sink)
        self.telemetry = Telemetry(experiment_id, spec.critic.context if spec.critic is not None else "none")
        self.estimator: AdvantageEstimator = spec.estimator.build()
        # Resolved settings (e.g. GAE's lambda under ``auto``) are the estimator's metrics before any fit.
        logger.info("estimator %s: %s", spec.estimator.name, self.estimator.metrics())
        self.warnings = warning_texts(spec)
        """The spec's warnings (config/findings.py): said in the log now and in the first step's row."""
        for warning in self.warnings:
            logger.warning("%s", warning)
        self._stop = threading.Event()
        self._player = player
        trainer = clients.value_trainer
        gate = update_gate(
            spec.critic,
            spec.critic_batch_size,
            clients.value_evaluator,
            trainer.status if trainer is not None else None,
            spec.orchestrator.rpc_deadline_seconds,
        )
        self.critic = CriticStage(
            spec.critic, clients.value_evaluator, copy.deepcopy(player.tokenizer), spec.policy.path, gate
        )
        self.critic.floor_seconds = spec.orchestrator.rpc_deadline_seconds
        self.warmup = CriticWarmup(
            spec.critic, self.estimator, trainer.status if trainer is not None else None
        )
        self.batches = BatchSource(spec, clients.environment, player, self.critic, self._stop)
        # Held-out evaluation runs in the policy loop while the rollout stage generates.
        self._eval_player = dataclasses.replace(player, tokenizer=copy.deepcopy(player.tokenizer))
        # The in-run critic probe plays with the held-out evaluation's player.
        self.probe = in_run_probe(spec, self.critic, self._eval_player, clients)
        self._clock: Callable[[], float] = time.monotonic
        """The wall clock of ``seconds`` and ``orchestrator.max_seconds``."""
        self._started = self._clock()
        self._elapsed_before = 0.0

    def run(self, on_step: OnStep | None = None) -> OrchestratorState:
        spec = self.spec
        state = self.checkpoints.load()
        self._started = self._clock()
        self._elapsed_before = state.elapsed_seconds
        state = self._recover(state)
        if state.completed_step >= spec.orchestrator.steps or state.wall_budget_spent:
            return state
        if state.estimator:
            self.estimator.load_state_dict(state.estimator)
        self.critic.restore(state.reward_average, state.reward_average_batches, state.newest_value_version)
        self._initial_evaluation(state)
        self._started = self._clock()  # the budget starts after the starting policy's evaluation
        state = self._warmup(state)
        self.checkpoints.save(state)
        try:
            while state.completed_step < spec.orchestrator.steps and not self._stop.is_set():
                state = self._policy_step(state, on_step)
                if wall_budget_spent(state, spec.orchestrator.steps, spec.orchestrator.max_seconds):
                    logger.info(
                        "wall-time budget spent after step %d: the run ends here", state.completed_step
                    )
                    state = replace(state, wall_budget_spent=True)
                    self.checkpoints.save(state)
                    break
        finally:
            self._stop.set()
            self.batches.join()
        return state

    def stop(self) -> None:
        self._stop.set()

    # ---- before the first step -----------------------------------------------------------
    def _recover(self, state: OrchestratorState) -> OrchestratorState:
        pending = self.checkpoints.load_pending()
        if pending is None:
            return state
        status = self.clients.policy_trainer.status()
        if status.last_step >= pending.step:
            logger.info(
                "step %d was applied by the policy trainer before the restart; finishing it", pending.step
            )
        else:
            logger.info("resending pending step %d to the policy trainer", pending.step)
        # Train is idempotent per step: an already-applied step is answered from the trainer's record.
        response = self.clients.policy_trainer.train(pending.step, pending.trajectories)
        state, _ = self._finish_step(pending, response, recovering=True)
        return state

    def _initial_evaluation(self, state: OrchestratorState) -> None:
        if self.spec.orchestrator.eval_every is None or state.completed_step > 0 or self.log.has_step(0):
            return  # a resumed run has its row of step 0
        row = initial_row(self._eval_player, self.clients.environment, self.spec, self._elapsed_before)
        self.telemetry.held_out(row["eval_success"])
        self.log.append(row)

    def _warmup(self, state: OrchestratorState) -> OrchestratorState:
        # A critic that is never trained (the frozen LLM) has nothing to wait for.
        if state.warmup_done or not self.warmup.needed:
            return replace(state, warmup_done=True)
        if self.warmup.steps_meanwhile:
            logger.info(
                "critic warm-up: %d value updates on the policy steps' batches; %s steps at its "
                "critic-free start until then",
                self.warmup.updates,
                self.spec.estimator.name,
            )
            return replace(state, warmup_done=True)
        logger.info("critic warmup: waiting for %d value updates", self.warmup.updates)
        # One batch at a time, in this thread: none is left half-scored when the warm-up ends.
        source = BatchSource(
            self.spec,
            self.clients.environment,
            self._player,
            self.critic,
            self._stop,
            WARMUP_DRAWS,
            prefetch=0,
        )
        while not self._stop.is_set():
            warmed = self.warmup.warmed_version()
            if warmed is not None:
                logger.info("critic warmed up at version %d after %d batches", warmed, state.warmup_cursor)
                self.critic.policy_stream_from(warmed)
                return replace(state, warmup_done=True, critic_warm_version=warmed)
            batch = source.next(state.warmup_cursor)
            if batch.scored.degraded is None:
                self._push_replay(batch.scored.trajectories)
            self._consumed(batch)
            state = self._past(state, batch, stream="warmup_cursor")
            self.checkpoints.save(state)
            logger.info(
                "warmup batch %d pushed (critic version %d)", batch.cursor, batch.scored.value_version
            )
        return state

    # ---- one policy step -----------------------------------------------------------------
    def _policy_step(self, state: OrchestratorState, on_step: OnStep | None) -> OrchestratorState:
        step = state.completed_step + 1
        step_start = time.perf_counter()
        batch = self.batches.next(state.cursor)
        wait_end = time.perf_counter()
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
