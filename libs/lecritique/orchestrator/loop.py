"""The experiment loop of one experiment (Le Critique Appendix B).

Around the steps: a pending step left by a crash is finished first (the trainer applied it or
gets it again); with ``eval_every`` the initial policy is evaluated once (the row of step 0,
:func:`~lecritique.orchestrator.heldout.initial_row`) before the wall budget's clock starts; then
the critic's warm-up, then policy steps (:mod:`~lecritique.orchestrator.step`, which reads one step
top to bottom) until ``orchestrator.steps`` or ``orchestrator.max_seconds`` ends the run.

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

from lecritique.advantages import (
    AdvantageEstimator,
)
from lecritique.config.experiment import ExperimentSpec
from lecritique.config.findings import warning_texts
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.batches import WARMUP_DRAWS, BatchSource
from lecritique.orchestrator.clients import ServiceClients
from lecritique.orchestrator.critic_stage import CriticStage
from lecritique.orchestrator.heldout import initial_row
from lecritique.orchestrator.probe import in_run_probe
from lecritique.orchestrator.state import CheckpointStore, OrchestratorState, wall_budget_spent
from lecritique.orchestrator.step import DegradedTooLong, OnStep, PolicyStep
from lecritique.orchestrator.telemetry import StepLog, Telemetry
from lecritique.orchestrator.update_gate import update_gate
from lecritique.orchestrator.warmup import CriticWarmup
from lecritique.replay import ReplayBuffer
from lecritique.run_folder import RunFolder
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

__all__ = ["DegradedTooLong", "OnStep", "Orchestrator"]


class Orchestrator(PolicyStep):
    """One experiment's loop: recovery, the initial evaluation, the critic's warm-up, then policy
    steps (:class:`~lecritique.orchestrator.step.PolicyStep`) until the steps or the wall budget end it."""

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
        pin_critic: Callable[[int], bool] | None = None,
    ) -> None:
        """``pin_critic(version)`` keeps that critic version from pruning (the weight store's
        :meth:`~lecritique.weights.store.WeightStore.pin`); each step pins the one that scored it."""
        self.spec = spec
        self.pin_critic = pin_critic
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
