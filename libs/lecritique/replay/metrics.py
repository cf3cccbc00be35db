"""Prometheus metrics of the replay buffer (registered once, in the default registry).

Every process reports what its own calls did; summing over pods gives the experiment's totals.
Dashboards reference these exact names.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

DEPTH = Gauge(
    "lecritique_replay_depth",
    "Entries in the replay buffer, as last seen by this process.",
    ["experiment"],
)
PUSHED = Counter(
    "lecritique_replay_pushed_total",
    "Entries this process pushed (acknowledged by Redis).",
    ["experiment"],
)
SAMPLED = Counter(
    "lecritique_replay_sampled_total",
    "Entries this process sampled (one count per returned entry).",
    ["experiment"],
)
EVICTIONS = Counter(
    "lecritique_replay_evictions_total",
    "Entries evicted by this process's calls, by reason: capacity (FIFO), reuse (max_reuse reached), age.",
    ["experiment", "reason"],
)
SAMPLE_AGE = Histogram(
    "lecritique_replay_sample_age_versions",
    "current_policy_version - policy_version of each sampled entry.",
    ["experiment"],
    buckets=(0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64),
)
REUSE_COUNT = Histogram(
    "lecritique_replay_reuse_count",
    "Times an entry has been sampled, counting the sample that returned it (1 = first use).",
    ["experiment"],
    buckets=(1, 2, 3, 4, 6, 8, 16, 32),
)
USES_AT_EVICTION = Histogram(
    "lecritique_replay_uses_at_eviction",
    "Times an entry had been sampled when it was evicted, by eviction reason (0 = never used).",
    ["experiment", "reason"],
    buckets=(0, 1, 2, 3, 4, 6, 8, 16, 32),
)
REDIS_RETRIES = Counter(
    "lecritique_replay_redis_retries_total",
    "Reconnect attempts after a Redis connection error during a replay operation.",
    ["experiment"],
)
OPERATION_SECONDS = Histogram(
    "lecritique_replay_operation_seconds",
    "Wall time of replay operations (push, sample, stats) including retries.",
    ["experiment", "operation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
)
