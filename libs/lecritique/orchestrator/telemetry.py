"""What the orchestrator reports: ``metrics.jsonl`` (plus a sink, e.g. Redis) and Prometheus.

Every policy step appends one row to ``metrics.jsonl``; the same row sets the gauges below.
Estimators declare their own gauges (:attr:`lecritique.advantages.AdvantageEstimator.gauges`),
so nothing here knows an estimator's metric names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from lecritique.advantages import estimator_gauges
from lecritique.orchestrator.row import StepRow

STEP = Gauge("lecritique_orchestrator_step", "Last completed policy step", ["experiment"])
REWARD = Gauge("lecritique_reward_mean", "Mean reward of the last policy batch", ["experiment"])
EXPLAINED_VARIANCE = Gauge(
    "lecritique_value_explained_variance",
    "Critic explained variance on the last policy batch",
    ["experiment", "critic_context"],
)
VALUE_EV_BUCKET = Gauge(
    "lecritique_value_ev",
    "Critic explained variance on the last policy batch, per response-position bucket (edges from the response budget)",
    ["experiment", "bucket"],
)
POLICY_VERSION = Gauge("lecritique_policy_version", "Policy weight version in rollout", ["experiment"])
VALUE_VERSION = Gauge(
    "lecritique_value_version", "Critic weight version of the last evaluation", ["experiment"]
)
DROPPED_STALE = Counter(
    "lecritique_dropped_stale_total", "Rollouts dropped as too off-policy", ["experiment"]
)
STEP_SECONDS = Histogram(
    "lecritique_policy_step_seconds",
    "Wall time of one policy step",
    ["experiment"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
VALUE_WAIT = Counter(
    "lecritique_value_wait_seconds_total",
    "Time the policy loop spent waiting on the value plane",
    ["experiment"],
)
EVAL_SUCCESS = Gauge(
    "lecritique_eval_success",
    "Greedy success of the policy on held-out tasks (orchestrator.eval_every)",
    ["experiment"],
)
CRITIC_DEGRADED = Gauge(
    "lecritique_critic_degraded",
    "1 while policy steps run without the critic (value plane down: leave-one-out baseline), else 0",
    ["experiment"],
)
DEGRADED_STEPS = Counter(
    "lecritique_degraded_steps_total", "Policy steps taken without the critic", ["experiment"]
)
CRITIC_UPDATES = Gauge(
    "lecritique_critic_updates_done",
    "Critic updates made between the versions that scored the last two policy batches (the setting: critic.updates_per_step)",
    ["experiment"],
)
PROBE_FRACTION = Gauge(
    "lecritique_critic_ceiling_fraction",
    "Critic EV / Monte-Carlo ceiling on held-out states at the last critic probe (critic_probe)",
    ["experiment", "critic_context"],
)
PROBE_CEILING = Gauge(
    "lecritique_critic_probe_ceiling",
    "Monte-Carlo ceiling Var(E[R|s]) / Var(R) at the last critic probe",
    ["experiment"],
)
PROBE_EV = Gauge(
    "lecritique_critic_probe_ev",
    "Critic EV (MSE-based) on the held-out states of the last critic probe",
    ["experiment"],
)
PROBE_STEP = Gauge("lecritique_critic_probe_step", "Policy step of the last critic probe", ["experiment"])
TOKENS = Counter("lecritique_rollout_tokens_total", "Policy tokens generated", ["experiment"])
ESTIMATOR_GAUGES = {
    key: Gauge(f"lecritique_{key}", text, ["experiment", "bucket"])
    for key, text in estimator_gauges().items()
}
"""The estimators' gauges, by metric key (label ``bucket``: ``all``, or the bucket of ``<key>_bucket_<m>``)."""

_BUCKET_KEY = re.compile(r"^(?P<key>.+)_bucket_(?P<bucket>\d+)$")


class StepLog:
    """``metrics.jsonl`` of one run (one row per policy step) and where else rows go."""

    def __init__(self, path: Path, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.path = path
        self.sink = sink

    def append(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        if self.sink is not None:
            self.sink(row)

    def has_step(self, step: int) -> bool:
        """Whether a row for ``step`` was written (by this process or one before a restart)."""
        if not self.path.exists():
            return False
        for line in reversed(self.path.read_text().splitlines()):
            try:
                if json.loads(line).get("step") == step:
                    return True
            except json.JSONDecodeError:
                continue
        return False


class Telemetry:
    """Prometheus series of one experiment."""

    def __init__(self, experiment_id: str, critic_context: str) -> None:
        self.experiment_id = experiment_id
        self.critic_context = critic_context
        # A counter's series exists from the start (0), not from its first increment: a run that never
        # drops a rollout shows 0 per minute on the dashboard, not "no data".
        DROPPED_STALE.labels(experiment_id)

    def dropped(self, count: int) -> None:
        DROPPED_STALE.labels(self.experiment_id).inc(count)

    def finished(self, step: int, policy_version: int) -> None:
        STEP.labels(self.experiment_id).set(step)
        POLICY_VERSION.labels(self.experiment_id).set(policy_version)

    def held_out(self, success: float) -> None:
        EVAL_SUCCESS.labels(self.experiment_id).set(success)

    def probed(self, step: int, probe: dict[str, Any]) -> None:
        """The series of a critic probe (nothing when it was skipped)."""
        if not probe:
            return
        labels = (self.experiment_id,)
        PROBE_STEP.labels(*labels).set(step)

        def value(key: str) -> float:
            # NaN when undefined (no positive ceiling to reach): a comparison with it never fires an alert.
            found = probe.get(key)
            return float("nan") if found is None else float(found)

        PROBE_CEILING.labels(*labels).set(value("probe_ceiling"))
        PROBE_EV.labels(*labels).set(value("probe_critic_ev"))
        PROBE_FRACTION.labels(self.experiment_id, self.critic_context).set(value("probe_ceiling_fraction"))

    def step(self, row: StepRow) -> None:
        """The series of one step's row."""
        labels = (self.experiment_id,)
        REWARD.labels(*labels).set(row.reward_mean)
        if row.value_explained_variance is not None:
            EXPLAINED_VARIANCE.labels(self.experiment_id, self.critic_context).set(
                row.value_explained_variance
            )
        for bucket, ev in row.value_ev_buckets.items():
            VALUE_EV_BUCKET.labels(self.experiment_id, str(bucket)).set(ev)
        for key, value in row.estimator.items():
            match = _BUCKET_KEY.match(key)
            if key in ESTIMATOR_GAUGES:
                ESTIMATOR_GAUGES[key].labels(self.experiment_id, "all").set(value)
            elif match is not None and match["key"] in ESTIMATOR_GAUGES:
                ESTIMATOR_GAUGES[match["key"]].labels(self.experiment_id, match["bucket"]).set(value)
        CRITIC_DEGRADED.labels(*labels).set(row.critic_degraded)
        DEGRADED_STEPS.labels(*labels).inc(row.critic_degraded)
        if not row.critic_degraded:  # a degraded step has no critic version
            VALUE_VERSION.labels(*labels).set(row.value_version)
        if row.critic_updates_done is not None:
            CRITIC_UPDATES.labels(*labels).set(row.critic_updates_done)
        STEP_SECONDS.labels(*labels).observe(row.step_seconds or 0.0)
        VALUE_WAIT.labels(*labels).inc(row.value_wait_seconds)
        TOKENS.labels(*labels).inc(row.policy_tokens)
