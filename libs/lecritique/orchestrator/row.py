"""One policy step's metrics row (a line of ``metrics.jsonl``, the sink's and the trackers' row), typed.

The loop fills a :class:`StepRow` in three stages: the batch and the advantages
(``Orchestrator._policy_step``), the policy trainer's answer and the timings (``_train``), the
loaded weights and the held-out evaluation (``_finish_step``). :meth:`StepRow.to_dict` is the
row as written; its keys are the field names, except the open-ended groups, which are merged in
under their prefixes (see each field).

To add a metric: add a field below with its default and a one-line docstring, and set it where
it is measured; its name is the row key. A group of metrics whose names are not known in
advance (e.g. another service's stats) is a ``dict`` field written with a prefix in
:meth:`StepRow.to_dict` and read back in :meth:`StepRow.from_dict`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

_PREFIXED = {"critic": "critic_", "value_ev_buckets": "value_ev_bucket_", "policy": "policy_"}
"""Dict fields written as ``<prefix><key>`` (the other dict fields, :data:`_OWN_KEYS`, are
written with their own keys)."""
_OWN_KEYS = ("estimator", "held_out", "probe")


@dataclass
class StepRow:
    step: int
    """The policy step (from 1)."""
    critic_degraded: int = 0
    """1 when the batch was scored without the critic (value plane down: leave-one-out baseline)."""
    critic_degraded_reason: str | None = None
    """Why the value plane was degraded (None: it was not)."""
    evaluated_at: float | None = None
    """When the batch's evaluation finished (Unix seconds)."""
    reward_mean: float = 0.0
    """Mean reward of the batch."""
    value_explained_variance: float | None = None
    """The critic's explained variance on the batch's policy tokens (None: no values, or undefined)."""
    value_version: int = -1
    """The critic version that scored the batch."""
    dropped_stale: int = 0
    """Rollouts of the batch dropped as too off-policy."""
    batch_cursor: int = 0
    """Index of the batch in the policy steps' stream (the same batch in every arm of a seed)."""
    task_seed: int = 0
    """The seed its tasks were sampled with (the policy stream's draw of ``batch_cursor``)."""
    sampling_seed: int = 0
    """The seed its rollouts were sampled with (turn t: plus 7919 t)."""
    tasks_digest: str = ""
    """First 16 hex digits of the SHA-256 of its trajectories' task ids in order: equal digests, equal tasks."""
    warmup_batches: int = 0
    """Critic warm-up batches pushed to the replay before the first policy step (their own stream)."""
    critic_warm: bool | None = None
    """Whether the step's advantages used the critic's values: False while the critic warms up
    (``critic.warmup: auto``: the batch was scored before a warm critic version, so the estimator
    took its critic-free starting state and fitted nothing); None: the estimator uses no critic."""
    trajectories: int = 0
    """Trajectories the step trained on."""
    policy_tokens: int = 0
    """Policy tokens the step trained on."""
    rollout_seconds: float = 0.0
    """Wall time of the batch's rollouts."""
    evaluate_seconds: float = 0.0
    """Wall time of the batch's critic evaluation."""
    batch_wait_seconds: float = 0.0
    """Time the policy loop waited for the batch."""
    critic: dict[str, float] = field(default_factory=dict)
    """The value evaluator's stats of the batch, written as ``critic_<key>``."""
    estimator: dict[str, float] = field(default_factory=dict)
    """The estimator's step metrics (its ``report``), written with their own keys."""
    value_ev_buckets: dict[int, float] = field(default_factory=dict)
    """The critic's explained variance per response-position bucket, written as ``value_ev_bucket_<m>``
    (estimators that use a critic; undefined buckets are left out)."""
    critic_updates_done: int | None = None
    """Critic updates made between the versions that scored the previous step's batch and this one's
    (versions count publishes x ``critic.publish_every``; None: no trained critic's version, or degraded)."""
    critic_update_wait_seconds: float = 0.0
    """How long the evaluation stage waited for ``critic.updates_per_step`` updates."""
    critic_update_short: str | None = None
    """Why that wait ended before the updates were made (None: it did not)."""
    value_wait_seconds: float = 0.0
    """Time the policy loop waited on the value plane during this step."""
    train_seconds: float | None = None
    """Wall time of the policy trainer's update."""
    step_seconds: float | None = None
    """Wall time of the whole step."""
    seconds: float | None = None
    """Experiment wall time at the end of the update."""
    policy: dict[str, float] = field(default_factory=dict)
    """The policy trainer's metrics, written as ``policy_<key>``."""
    policy_version: int | None = None
    """The policy version loaded into rollout after the step."""
    held_out: dict[str, float] = field(default_factory=dict)
    """Held-out evaluation (``eval_success``, ...) on steps where it runs, written as they are."""
    probe: dict[str, Any] = field(default_factory=dict)
    """The in-run critic probe (``probe_ceiling``, ``probe_critic_ev``, ...; ``critic_probe``) on
    steps where it runs, written as they are (an undefined value is None)."""
    warnings: list[str] = field(default_factory=list)
    """Configuration warnings, in the first step's row only (left out when empty)."""

    def to_dict(self) -> dict[str, Any]:
        """The row as written: JSON-ready, unset (None) timings and policy version left out."""
        row: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name in _PREFIXED:
                row.update({f"{_PREFIXED[item.name]}{key}": entry for key, entry in value.items()})
            elif item.name in _OWN_KEYS:
                row.update(value)
            elif item.name == "warnings":
                if value:
                    row["warnings"] = list(value)
            elif value is not None or item.name in _ALWAYS_WRITTEN:
                row[item.name] = value
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> StepRow:
        """A row read back (the pending step's checkpoint): :meth:`to_dict` inverted."""
        scalars = {item.name for item in dataclasses.fields(cls)} - {*_PREFIXED, *_OWN_KEYS}
        known: dict[str, Any] = {key: value for key, value in row.items() if key in scalars}
        groups: dict[str, Any] = {name: {} for name in (*_PREFIXED, *_OWN_KEYS)}
        for key, value in row.items():
            if key in scalars:
                continue
            prefixed = next((name for name, prefix in _PREFIXED.items() if key.startswith(prefix)), None)
            if prefixed == "value_ev_buckets":
                groups[prefixed][int(key.removeprefix(_PREFIXED[prefixed]))] = value
            elif prefixed is not None:
                groups[prefixed][key.removeprefix(_PREFIXED[prefixed])] = value
            elif key.startswith("eval_"):
                groups["held_out"][key] = value
            elif key.startswith("probe_"):
                groups["probe"][key] = value
            else:
                groups["estimator"][key] = value
        return cls(**known, **groups)


_ALWAYS_WRITTEN = {
    "critic_degraded_reason",
    "evaluated_at",
    "value_explained_variance",
    "critic_updates_done",
    "critic_update_short",
}
"""Fields written even when None (readers expect the key on every row)."""
