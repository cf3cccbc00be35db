"""The experiment loop of one experiment (``../shared/DESIGN.md``, Le Critique Appendix B).

Per policy step k:

1. take the next batch of finished groups, drop rollouts more than ``max_off_policy_steps``
   policy versions old;
2. build each trajectory's critic context and evaluate every trajectory with the value evaluator
   (newest critic; the response names the version used);
3. freeze the advantages with the estimator's state fitted on *earlier* batches, then fit its
   state on this batch (TETHER's rho, EVPO's explained variance) for the next one;
4. push the evaluated trajectories to the replay stream (evaluate-before-train);
5. record the step as pending, send it to the policy trainer, load the published weights into
   every rollout replica, run the held-out evaluation when due, append the step's metrics,
   commit the checkpoint.

Steps 1-2 run ahead of the policy loop in two producer threads, a rollout stage and an
evaluation stage, so that batch k+1 is evaluated while batch k+2 is generated and batch k trains
(value evaluation off the critical path, Le Critique B.1). At most ``prefetch_batches + 1``
batches are in flight beyond the one training, as with a single producer.

Before the first policy update the loop only generates, evaluates and pushes, until the value
trainer reports ``warmup_updates`` critic updates (when the estimator uses the critic) and a
batch arrives scored by that warmed-up critic version.
"""

from __future__ import annotations

import copy
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import Counter, Gauge, Histogram

from lecritique.advantages import AdvantageBatch, AdvantageEstimator, explained_variance, freeze_then_fit
from lecritique.config.experiment import ExperimentSpec
from lecritique.critics.context import (
    PEER_SUMMARY_CHARS,
    GroupMember,
    build_group_contexts,
    build_group_peers,
)
from lecritique.critics.icc import ACTOR_KEY, REWARD_AVERAGE_KEY, RewardAverage
from lecritique.critics.prompts import describe_actor
from lecritique.critics.specs import ActorConditioning, TrainedCriticSpec
from lecritique.critics.types import Peer
from lecritique.orchestrator.clients import ServiceClients
from lecritique.orchestrator.episodes import EpisodeBatch, EpisodeRunner, SamplingSettings
from lecritique.orchestrator.state import CheckpointStore, OrchestratorState, PendingStep
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

STEP = Gauge("lecritique_orchestrator_step", "Last completed policy step", ["experiment"])
REWARD = Gauge("lecritique_reward_mean", "Mean reward of the last policy batch", ["experiment"])
EXPLAINED_VARIANCE = Gauge(
    "lecritique_value_explained_variance",
    "Critic explained variance on the last policy batch",
    ["experiment", "critic_context"],
)
RHO = Gauge("lecritique_tether_rho", "TETHER coefficient used for the last batch", ["experiment", "bucket"])
BUCKET_EV = Gauge(
    "lecritique_value_bucket_explained_variance",
    "Critic explained variance on the last policy batch, per TETHER response-position bucket",
    ["experiment", "bucket"],
)
POLICY_VERSION = Gauge("lecritique_policy_version", "Policy weight version in rollout", ["experiment"])
VALUE_VERSION = Gauge("lecritique_value_version", "Critic weight version of the last evaluation", ["experiment"])
DROPPED_STALE = Counter("lecritique_dropped_stale_total", "Rollouts dropped as too off-policy", ["experiment"])
STEP_SECONDS = Histogram(
    "lecritique_policy_step_seconds",
    "Wall time of one policy step",
    ["experiment"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
VALUE_WAIT = Counter(
    "lecritique_value_wait_seconds_total", "Time the policy loop spent waiting on the value plane", ["experiment"]
)
EVAL_SUCCESS = Gauge(
    "lecritique_eval_success", "Greedy success of the policy on held-out tasks (orchestrator.eval_every)", ["experiment"]
)
TOKENS = Counter("lecritique_rollout_tokens_total", "Policy tokens generated", ["experiment"])


@dataclass
class _GeneratedBatch:
    cursor: int
    episodes: EpisodeBatch
    evaluated: list[Trajectory]
    """The batch's trajectories with critic contexts and values attached (when there is a critic)."""
    value_version: int
    rollout_seconds: float
    evaluate_seconds: float
    critic_stats: dict[str, float]
    """The value evaluator's statistics of this batch (states scored, parse failures, LLM tokens and cost)."""
    reward_average_after: tuple[float, int]
    """The ICC reward average and its batch count once this batch is folded in (checkpointed)."""
    evaluate_window: tuple[float, float]
    """``perf_counter`` start and end of this batch's evaluation: the policy loop's value wait is its
    blocked time inside this window."""


@dataclass
class _RolledOut:
    cursor: int
    episodes: EpisodeBatch
    rollout_seconds: float


class Orchestrator:
    def __init__(
        self,
        spec: ExperimentSpec,
        clients: ServiceClients,
        runner: EpisodeRunner,
        out_dir: Path,
        *,
        experiment_id: str,
        replay: Any = None,
        metrics_sink: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.spec = spec
        self.clients = clients
        self.runner = runner
        self.out_dir = Path(out_dir)
        self.experiment_id = experiment_id
        self.replay = replay
        self.metrics_sink = metrics_sink
        self.checkpoints = CheckpointStore(self.out_dir / "orchestrator")
        self.metrics_path = self.out_dir / "metrics.jsonl"
        self.estimator: AdvantageEstimator = spec.estimator.build()
        # Resolved settings (e.g. GAE's lambda under ``auto``) are the estimator's metrics before any fit.
        logger.info("estimator %s: %s", spec.estimator.name, self.estimator.metrics())
        self.uses_critic = spec.critic is not None
        self.gates_on_critic = self.estimator.uses_critic
        self.context_kind = spec.critic.context if spec.critic is not None else "none"
        # In-Context Conditioning of text critics (GenAC §5.1): who the actor is, how it has been doing.
        conditioning = spec.critic.actor_conditioning() if spec.critic is not None else ActorConditioning()
        self.actor_description = conditioning.description or describe_actor(spec.policy.path)
        self.reward_average = RewardAverage(conditioning.reward_average_decay, conditioning.initial_reward_average)
        self.peer_chars = spec.critic.peer_summary_chars() if spec.critic is not None else PEER_SUMMARY_CHARS
        self._stop = threading.Event()
        self._queue: queue.Queue[_GeneratedBatch | BaseException] = queue.Queue()
        self._rolled: queue.Queue[_RolledOut | BaseException] = queue.Queue()
        # Batches in flight ahead of the policy loop (rolling out, evaluating, or queued).
        self._in_flight = threading.Semaphore(spec.orchestrator.prefetch_batches + 1)
        self._producers: list[threading.Thread] = []
        self._held: _GeneratedBatch | None = None
        """The first batch scored by the warmed-up critic, kept by the warmup for policy step 1."""
        # The evaluation stage encodes critic contexts while the rollout stage encodes prompts:
        # a Rust-backed tokenizer must not be used from two threads at once.
        self._context_tokenizer = copy.deepcopy(runner.tokenizer)
        # Held-out evaluation runs in the policy loop while the rollout stage generates.
        self._eval_runner = copy.copy(runner)
        self._eval_runner.tokenizer = copy.deepcopy(runner.tokenizer)
        self._started = time.monotonic()
        self._elapsed_before = 0.0
        self._labels = (experiment_id,)

    # ---- batches -------------------------------------------------------------------------
    def _roll_out(self, cursor: int) -> _RolledOut:
        rollout = self.spec.rollout
        start = time.perf_counter()
        tasks = self.clients.environment.sample_tasks(rollout.tasks_per_step, "train", self.spec.seed * 1_000_003 + cursor)
        episodes = self.runner.run(
            tasks,
            rollout.group_size,
            first_group_id=cursor * rollout.tasks_per_step,
            seed=self.spec.seed * 7_919 + cursor * 104_729,
            trajectory_prefix=f"b{cursor}",
        )
        return _RolledOut(cursor, episodes, time.perf_counter() - start)

    def _evaluate_batch(self, rolled: _RolledOut) -> _GeneratedBatch:
        episodes = rolled.episodes
        started = time.perf_counter()
        evaluated, value_version, evaluate_seconds, critic_stats = self._evaluate(episodes)
        # Folded in after evaluation: no critic input ever contains its own batch's rewards.
        self.reward_average.update(float(np.mean([t.reward for t in episodes.trajectories])))
        return _GeneratedBatch(
            rolled.cursor, episodes, evaluated, value_version, rolled.rollout_seconds, evaluate_seconds,
            critic_stats, (self.reward_average.value, self.reward_average.batches), (started, time.perf_counter()),
        )

    def _generate(self, cursor: int) -> _GeneratedBatch:
        return self._evaluate_batch(self._roll_out(cursor))

    def _produce_rollouts(self, first_cursor: int) -> None:
        cursor = first_cursor
        try:
            while not self._stop.is_set():
                if not self._in_flight.acquire(timeout=0.2):
                    continue
                self._rolled.put(self._roll_out(cursor))
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
                    self._queue.put(rolled)
                    return
                self._queue.put(self._evaluate_batch(rolled))
        except BaseException as error:
            if not self._stop.is_set():
                logger.exception("evaluation stage failed")
                self._queue.put(error)

    def _next_batch(self, cursor: int) -> _GeneratedBatch:
        if self._held is not None:
            held, self._held = self._held, None
            if held.cursor != cursor:
                raise RuntimeError(f"held batch out of order: expected cursor {cursor}, got {held.cursor}")
            return held
        if self.spec.orchestrator.prefetch_batches == 0:
            return self._generate(cursor)
        if not self._producers:
            self._producers = [
                threading.Thread(target=self._produce_rollouts, args=(cursor,), name="rollout-stage", daemon=True),
                threading.Thread(target=self._produce_evaluations, name="evaluation-stage", daemon=True),
            ]
            for thread in self._producers:
                thread.start()
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise RuntimeError("batch generation failed") from item
        self._in_flight.release()
        if item.cursor != cursor:
            raise RuntimeError(f"batch producer out of order: expected cursor {cursor}, got {item.cursor}")
        return item

    # ---- critic --------------------------------------------------------------------------
    def _critic_contexts(self, episodes: EpisodeBatch) -> tuple[list[str], list[list[Peer]]]:
        """Critic context text and group peers (the other members, summarised) of every trajectory."""
        if self.spec.critic is None:
            return ["" for _ in episodes.trajectories], [[] for _ in episodes.trajectories]
        by_group: dict[int, list[int]] = {}
        for index, trajectory in enumerate(episodes.trajectories):
            by_group.setdefault(trajectory.group_id, []).append(index)
        slots: dict[int, str] = {}
        peer_slots: dict[int, list[Peer]] = {}
        for indices in by_group.values():
            members = [
                GroupMember(
                    trajectory_id=episodes.trajectories[i].trajectory_id,
                    response_text=" ".join(episodes.action_texts[i]),
                    reward=episodes.trajectories[i].reward,
                    privileged=episodes.tasks[i].privileged,
                    outcome=str(episodes.trajectories[i].metadata.get("diagnostic", "")),
                )
                for i in indices
            ]
            texts = build_group_contexts(
                self.context_kind,
                members,
                privileged_key=self.spec.critic.privileged_key,
                max_context_chars=self.spec.critic.max_context_chars,
            )
            slots.update(zip(indices, texts, strict=True))
            peer_slots.update(zip(indices, build_group_peers(members, self.peer_chars), strict=True))
        count = len(episodes.trajectories)
        return [slots[i] for i in range(count)], [peer_slots[i] for i in range(count)]

    def _evaluate(self, episodes: EpisodeBatch) -> tuple[list[Trajectory], int, float, dict[str, float]]:
        """Attach critic contexts and values; returns the trajectories, value version, seconds, critic statistics."""
        trajectories = episodes.trajectories
        if self.clients.value_evaluator is None:
            return trajectories, -1, 0.0, {}
        contexts, peers = self._critic_contexts(episodes)
        tokenizer = self._context_tokenizer
        reward_average = self.reward_average.value
        shown = {"critic_context": self.context_kind, ACTOR_KEY: self.actor_description, REWARD_AVERAGE_KEY: reward_average}
        evaluated = []
        for trajectory, context in zip(trajectories, contexts, strict=True):
            context_ids = np.asarray(tokenizer.encode(context, add_special_tokens=False), dtype=np.int32) if context else None
            evaluated.append(replace(trajectory, critic_context_ids=context_ids, metadata={**trajectory.metadata, **shown}))
        start = time.perf_counter()
        values, value_version, stats = self.clients.value_evaluator.evaluate(
            evaluated,
            contexts,
            episodes.prompt_texts,
            peers=peers,
            actor_description=self.actor_description,
            actor_reward_average=reward_average,
        )
        seconds = time.perf_counter() - start
        evaluated = [
            replace(t, values=v, value_version=value_version) for t, v in zip(evaluated, values, strict=True)
        ]
        return evaluated, value_version, seconds, {**stats, "reward_average": reward_average}

    @staticmethod
    def _advantage_batch(trajectories: list[Trajectory]) -> AdvantageBatch:
        length = max(len(t.token_ids) for t in trajectories)
        size = len(trajectories)
        mask = np.zeros((size, length), dtype=bool)
        step_ids = np.zeros((size, length), dtype=np.int64)
        values = np.zeros((size, length), dtype=np.float32) if trajectories[0].values is not None else None
        for row, t in enumerate(trajectories):
            n = len(t.token_ids)
            mask[row, :n] = t.policy_mask
            step_ids[row, :n] = t.step_ids
            if values is not None and t.values is not None:
                values[row, :n] = t.values
        return AdvantageBatch(
            rewards=np.array([t.reward for t in trajectories]),
            group_ids=np.array([t.group_id for t in trajectories]),
            mask=mask,
            values=values,
            step_ids=step_ids,
        )

    # ---- the loop ------------------------------------------------------------------------
    def _append_metrics(self, row: dict[str, Any]) -> None:
        with self.metrics_path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        if self.metrics_sink is not None:
            self.metrics_sink(row)

    def _metrics_has_step(self, step: int) -> bool:
        if not self.metrics_path.exists():
            return False
        for line in reversed(self.metrics_path.read_text().splitlines()):
            try:
                if json.loads(line).get("step") == step:
                    return True
            except json.JSONDecodeError:
                continue
        return False

    def _elapsed(self) -> float:
        """Experiment wall time: what earlier orchestrator processes spent plus this one's."""
        return self._elapsed_before + (time.monotonic() - self._started)

    def _finish_step(self, pending: PendingStep, response: Any, *, recovering: bool = False) -> OrchestratorState:
        """Load the new weights everywhere, log the step, commit the checkpoint."""
        results = self.clients.rollout.load_weights(response.policy_version, response.path)
        failures = {address: r for address, r in results.items() if isinstance(r, Exception)}
        if len(failures) == len(results):
            raise RuntimeError(f"no rollout replica loaded policy version {response.policy_version}: {failures}")
        state = replace(pending.state_after, policy_version=int(response.policy_version), policy_path=response.path)
        metrics = dict(pending.metrics)
        metrics.update({f"policy_{k}": v for k, v in response.metrics.items()})
        metrics["policy_version"] = int(response.policy_version)
        eval_every = self.spec.orchestrator.eval_every
        if eval_every is not None and pending.step % eval_every == 0:
            metrics.update(self._held_out_eval(pending.step))
        # A crash between appending the row and committing the checkpoint must not log the step twice.
        if not (recovering and self._metrics_has_step(pending.step)):
            self._append_metrics(metrics)
        self.checkpoints.save(state)
        self.checkpoints.clear_pending()
        STEP.labels(*self._labels).set(pending.step)
        POLICY_VERSION.labels(*self._labels).set(response.policy_version)
        return state

    def _held_out_eval(self, step: int) -> dict[str, float]:
        """Greedy episodes of the just-loaded policy on the same eval-split tasks every time."""
        spec = self.spec
        start = time.perf_counter()
        tasks = self.clients.environment.sample_tasks(spec.orchestrator.eval_tasks, "eval", spec.seed)
        greedy = SamplingSettings(temperature=0.0, top_p=1.0, max_tokens=self.runner.sampling.max_tokens)
        episodes = self._eval_runner.run(
            tasks, 1, first_group_id=0, seed=spec.seed, trajectory_prefix=f"eval{step}", sampling=greedy
        )
        rewards = np.array([t.reward for t in episodes.trajectories], dtype=np.float64)
        success = float(np.mean(rewards >= 1.0))
        EVAL_SUCCESS.labels(*self._labels).set(success)
        logger.info("step %d: held-out greedy success %.3f on %d tasks", step, success, len(tasks))
        return {
            "eval_success": success,
            "eval_reward_mean": float(rewards.mean()),
            "eval_seconds": time.perf_counter() - start,
        }

    def _recover(self, state: OrchestratorState) -> OrchestratorState:
        pending = self.checkpoints.load_pending()
        if pending is None:
            return state
        status = self.clients.policy_trainer.status()
        if status.last_step >= pending.step:
            logger.info("step %d was applied by the policy trainer before the restart; finishing it", pending.step)
        else:
            logger.info("resending pending step %d to the policy trainer", pending.step)
        # Train is idempotent per step: an already-applied step is answered from the trainer's record.
        response = self.clients.policy_trainer.train(pending.step, pending.trajectories)
        return self._finish_step(pending, response, recovering=True)

    def _warmup(self, state: OrchestratorState) -> OrchestratorState:
        critic = self.spec.critic
        # A critic that is never trained (the frozen LLM) has nothing to wait for.
        if state.warmup_done or not isinstance(critic, TrainedCriticSpec) or not self.gates_on_critic:
            return replace(state, warmup_done=True)
        if critic.warmup_updates == 0:
            return replace(state, warmup_done=True)
        assert self.clients.value_trainer is not None
        logger.info("critic warmup: waiting for %d value updates", critic.warmup_updates)
        warmed_version: int | None = None
        while not self._stop.is_set():
            if warmed_version is None:
                status = self.clients.value_trainer.status()
                if status.updates >= critic.warmup_updates:
                    warmed_version = int(status.published_version)
                    logger.info("critic warmed up at version %d; waiting for the evaluator to serve it", warmed_version)
            batch = self._next_batch(state.cursor)
            # Batches evaluated ahead while the critic warmed up carry an unwarmed critic's values:
            # they feed the replay stream, never a policy update.
            if warmed_version is not None and batch.value_version >= warmed_version:
                self._held = batch
                break
            self._push_replay(batch.evaluated)
            state = self._past(state, batch)
            self.checkpoints.save(state)
            logger.info("warmup batch %d pushed (critic version %d)", batch.cursor, batch.value_version)
        return replace(state, warmup_done=True)

    @staticmethod
    def _past(state: OrchestratorState, batch: _GeneratedBatch, **changes: Any) -> OrchestratorState:
        """``state`` once ``batch`` is consumed: the next cursor, the reward average including it."""
        average, batches = batch.reward_average_after
        return replace(
            state, cursor=batch.cursor + 1, reward_average=average, reward_average_batches=batches, **changes
        )

    def _push_replay(self, trajectories: list[Trajectory]) -> None:
        if self.replay is None:
            return
        self.replay.push(trajectories, policy_version=[t.policy_version for t in trajectories])

    def run(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> OrchestratorState:
        spec = self.spec
        state = self.checkpoints.load()
        self._started = time.monotonic()
        self._elapsed_before = state.elapsed_seconds
        state = self._recover(state)
        if state.completed_step >= spec.orchestrator.steps:
            return state
        if state.estimator:
            self.estimator.load_state_dict(state.estimator)
        if state.reward_average is not None:
            self.reward_average.value = state.reward_average
            self.reward_average.batches = state.reward_average_batches
        state = self._warmup(state)
        self.checkpoints.save(state)
        try:
            while state.completed_step < spec.orchestrator.steps and not self._stop.is_set():
                state = self._policy_step(state, on_step)
        finally:
            self._stop.set()
            for thread in self._producers:
                thread.join(timeout=60)
        return state

    def stop(self) -> None:
        self._stop.set()

    def _policy_step(self, state: OrchestratorState, on_step: Callable[[dict[str, Any]], None] | None) -> OrchestratorState:
        spec = self.spec
        step = state.completed_step + 1
        step_start = time.perf_counter()
        batch = self._next_batch(state.cursor)
        wait_end = time.perf_counter()
        wait_seconds = wait_end - step_start
        trajectories = batch.episodes.trajectories
        # A group is dropped whole when any member is too off-policy: group baselines need all K.
        stale_groups = {
            t.group_id for t in trajectories
            if state.policy_version - t.policy_version > spec.orchestrator.max_off_policy_steps
        }
        kept = [i for i, t in enumerate(trajectories) if t.group_id not in stale_groups]
        dropped = len(trajectories) - len(kept)
        if dropped:
            DROPPED_STALE.labels(*self._labels).inc(dropped)
        if not kept:
            logger.warning("step %d: every rollout of batch %d was stale; sampling again", step, batch.cursor)
            return self._past(state, batch, dropped_stale_total=state.dropped_stale_total + dropped)

        evaluated = [batch.evaluated[i] for i in kept]
        value_version = batch.value_version
        advantage_batch = self._advantage_batch(evaluated)
        frozen = freeze_then_fit(self.estimator, advantage_batch)
        advantages = frozen.advantages
        with_advantages = [
            replace(t, advantages=advantages[row, : len(t.token_ids)]) for row, t in enumerate(evaluated)
        ]
        self._push_replay(with_advantages)
        rewards = np.array([t.reward for t in evaluated])
        ev = (
            explained_variance(advantage_batch.values, advantage_batch.rewards, advantage_batch.mask)
            if advantage_batch.values is not None
            else float("nan")
        )
        metrics: dict[str, Any] = {
            "step": step,
            "reward_mean": float(rewards.mean()),
            "value_explained_variance": None if np.isnan(ev) else ev,
            "value_version": value_version,
            "dropped_stale": dropped,
            "batch_cursor": batch.cursor,
            "trajectories": len(evaluated),
            "policy_tokens": int(sum(t.num_policy_tokens for t in evaluated)),
            "rollout_seconds": batch.rollout_seconds,
            "evaluate_seconds": batch.evaluate_seconds,
            "batch_wait_seconds": wait_seconds,
            **{f"critic_{key}": value for key, value in batch.critic_stats.items()},
        }
        metrics.update(frozen.metrics)
        state_after = self._past(
            state,
            batch,
            completed_step=step,
            estimator=self.estimator.state_dict(),
            dropped_stale_total=state.dropped_stale_total + dropped,
        )
        # The policy loop waits on the value plane only while it is blocked on a batch whose
        # evaluation is running: the overlap of the two intervals.
        evaluate_start, evaluate_end = batch.evaluate_window
        metrics["value_wait_seconds"] = max(0.0, min(wait_end, evaluate_end) - max(step_start, evaluate_start))
        train_start = time.perf_counter()
        pending = PendingStep(step, with_advantages, state_after, metrics)
        self.checkpoints.save_pending(pending)
        response = self.clients.policy_trainer.train(step, with_advantages)
        metrics["train_seconds"] = time.perf_counter() - train_start
        metrics["step_seconds"] = time.perf_counter() - step_start
        metrics["seconds"] = self._elapsed()
        pending = PendingStep(step, with_advantages, replace(state_after, elapsed_seconds=metrics["seconds"]), metrics)
        new_state = self._finish_step(pending, response)
        self._observe(metrics, value_version)
        if on_step is not None:
            on_step(metrics)
        return new_state

    def _observe(self, metrics: dict[str, Any], value_version: int) -> None:
        REWARD.labels(*self._labels).set(metrics["reward_mean"])
        if metrics.get("value_explained_variance") is not None:
            EXPLAINED_VARIANCE.labels(self.experiment_id, self.context_kind).set(metrics["value_explained_variance"])
        for key, value in metrics.items():
            if key == "tether_rho":
                RHO.labels(self.experiment_id, "all").set(value)
            elif key.startswith("tether_rho_bucket_"):
                RHO.labels(self.experiment_id, key.rsplit("_", 1)[-1]).set(value)
            elif key.startswith("value_ev_bucket_"):
                BUCKET_EV.labels(self.experiment_id, key.rsplit("_", 1)[-1]).set(value)
        VALUE_VERSION.labels(*self._labels).set(value_version)
        STEP_SECONDS.labels(*self._labels).observe(metrics["step_seconds"])
        VALUE_WAIT.labels(*self._labels).inc(metrics["value_wait_seconds"])
        TOKENS.labels(*self._labels).inc(metrics["policy_tokens"])


def state_summary(state: OrchestratorState) -> dict[str, Any]:
    return asdict(state)
