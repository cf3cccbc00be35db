"""What a policy step takes from its batch: the trajectories fresh enough to train on, and the
first stage of the step's metrics row, what the batch, its advantages and the critic that scored
it tell (the policy trainer's answer, the timings and the held-out evaluation are added later by
the loop, :mod:`~lecritique.orchestrator.loop`)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from lecritique.advantages import AdvantageBatch, AdvantageEstimator, explained_variance
from lecritique.advantages.metrics import bucket_explained_variance
from lecritique.config.experiment import ExperimentSpec
from lecritique.critics.specs import TrainedCriticSpec
from lecritique.orchestrator.batches import POLICY_DRAWS, GeneratedBatch
from lecritique.orchestrator.row import StepRow
from lecritique.orchestrator.state import OrchestratorState
from lecritique.trajectory import Trajectory


def fresh_trajectories(
    batch: GeneratedBatch, policy_version: int, limit: int
) -> tuple[list[Trajectory], int]:
    """The batch's evaluated trajectories without stale groups (a rollout more than ``limit``
    versions behind ``policy_version``), and how many were dropped.

    A group is dropped whole when any member is too off-policy: group baselines need all K.
    """
    stale = {t.group_id for t in batch.episodes.trajectories if policy_version - t.policy_version > limit}
    kept = [t for t in batch.scored.trajectories if t.group_id not in stale]
    return kept, len(batch.scored.trajectories) - len(kept)


def batch_row(
    spec: ExperimentSpec,
    estimator: AdvantageEstimator,
    state: OrchestratorState,
    batch: GeneratedBatch,
    advantage_batch: AdvantageBatch,
    *,
    step: int,
    dropped: int,
    waited: tuple[float, float],
    estimator_metrics: dict[str, Any],
) -> StepRow:
    """The row of policy step ``step`` on ``batch`` (``dropped`` stale trajectories left out), as far
    as the batch tells it; ``state`` is the loop's state before the step, ``waited`` the (start, end)
    of the policy loop's wait for the batch."""
    step_start, wait_end = waited
    row = _scored_batch_row(step, batch, advantage_batch, dropped, wait_end - step_start)
    row.task_seed = POLICY_DRAWS.task_seed(spec.seed, batch.cursor)
    row.sampling_seed = POLICY_DRAWS.sampling_seed(spec.seed, batch.cursor)
    row.tasks_digest = tasks_digest(batch)
    row.warmup_batches = state.warmup_cursor
    _set_critic_updates(row, spec, state, batch)
    row.estimator = estimator_metrics
    row.value_ev_buckets = _bucket_explained_variance(spec, estimator, advantage_batch)
    # The policy loop waits on the value plane only while it is blocked on a batch whose
    # evaluation is running: the overlap of the two intervals.
    evaluate_start, evaluate_end = batch.evaluate_window
    row.value_wait_seconds = max(0.0, min(wait_end, evaluate_end) - max(step_start, evaluate_start))
    return row


def tasks_digest(batch: GeneratedBatch) -> str:
    """First 16 hex digits of the SHA-256 of the task ids of the batch's trajectories, in order."""
    ids = "\n".join(t.task_id for t in batch.episodes.trajectories)
    return hashlib.sha256(ids.encode()).hexdigest()[:16]


def _scored_batch_row(
    step: int, batch: GeneratedBatch, advantage_batch: AdvantageBatch, dropped: int, wait_seconds: float
) -> StepRow:
    ev = (
        explained_variance(advantage_batch.values, advantage_batch.rewards, advantage_batch.mask)
        if advantage_batch.values is not None
        else float("nan")
    )
    return StepRow(
        step=step,
        critic_degraded=int(batch.scored.degraded is not None),
        critic_degraded_reason=batch.scored.degraded,
        evaluated_at=batch.evaluated_at,
        reward_mean=float(advantage_batch.rewards.mean()),
        value_explained_variance=None if np.isnan(ev) else ev,
        value_version=batch.scored.value_version,
        dropped_stale=dropped,
        batch_cursor=batch.cursor,
        trajectories=advantage_batch.batch_size,
        policy_tokens=int(advantage_batch.mask.sum()),
        rollout_seconds=batch.rollout_seconds,
        evaluate_seconds=batch.scored.seconds,
        batch_wait_seconds=wait_seconds,
        critic=dict(batch.scored.stats),
    )


def _set_critic_updates(
    row: StepRow, spec: ExperimentSpec, state: OrchestratorState, batch: GeneratedBatch
) -> None:
    """``critic_updates_done``: critic updates made between the versions that scored the previous
    step's batch and this one's (versions count publishes; None without a trained critic's version),
    and how long the evaluation stage waited for them (``critic.updates_per_step``)."""
    critic = spec.critic
    achieved = None
    known = state.newest_value_version >= 0 and batch.scored.degraded is None
    if isinstance(critic, TrainedCriticSpec) and known:
        achieved = (batch.scored.value_version - state.newest_value_version) * critic.publish_every
    waited, short = batch.scored.update_wait
    row.critic_updates_done, row.critic_update_wait_seconds, row.critic_update_short = (
        achieved,
        waited,
        short,
    )


def _bucket_explained_variance(
    spec: ExperimentSpec, estimator: AdvantageEstimator, advantage_batch: AdvantageBatch
) -> dict[int, float]:
    """The critic's explained variance per response-position bucket, edges from the response
    budget (as TETHER's); for every estimator that uses the critic, on batches that carry values."""
    if not estimator.uses_critic or advantage_batch.values is None:
        return {}
    per_bucket = bucket_explained_variance(
        advantage_batch.values,
        advantage_batch.rewards,
        advantage_batch.mask,
        spec.estimator.ev_buckets(),
        spec.response_budget,
    )
    # Undefined buckets (no tokens, or equal returns) are left out: metrics rows are JSON.
    return {m: float(ev) for m, ev in enumerate(per_bucket) if np.isfinite(ev)}
