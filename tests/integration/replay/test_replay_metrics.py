"""The replay buffer's Prometheus metrics follow what its calls did."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest


def _value(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_metrics_count_pushes_samples_and_evictions(make_buffer):
    experiment = "metrics-exp"
    buffer = make_buffer(experiment=experiment, capacity=3, max_reuse=2, max_age_versions=1)
    buffer.push([b"a", b"b", b"c", b"d"], policy_version=[5, 5, 6, 6])  # a is evicted by capacity
    assert _value("lecritique_replay_depth", experiment=experiment) == 3
    assert _value("lecritique_replay_pushed_total", experiment=experiment) == 4
    assert _value("lecritique_replay_evictions_total", experiment=experiment, reason="capacity") == 1

    batch = buffer.sample(3, current_policy_version=6)
    assert len(batch) == 3
    assert _value("lecritique_replay_sample_age_versions_count", experiment=experiment) == 3
    assert _value("lecritique_replay_sample_age_versions_sum", experiment=experiment) == 1  # b: 6-5
    assert _value("lecritique_replay_reuse_count_bucket", experiment=experiment, le="1.0") == 3

    buffer.sample(3, current_policy_version=6)  # second use of each: all evicted by reuse
    assert _value("lecritique_replay_evictions_total", experiment=experiment, reason="reuse") == 3
    assert _value("lecritique_replay_uses_at_eviction_sum", experiment=experiment, reason="reuse") == 6
    assert _value("lecritique_replay_depth", experiment=experiment) == 0
    assert _value("lecritique_replay_sampled_total", experiment=experiment) == 6

    buffer.push([b"old"], policy_version=1)
    buffer.sample(1, current_policy_version=9)
    assert _value("lecritique_replay_evictions_total", experiment=experiment, reason="age") == 1
    assert _value("lecritique_replay_operation_seconds_count", experiment=experiment, operation="sample") == 3

    exposition = generate_latest(REGISTRY).decode()
    for name in (
        "lecritique_replay_depth",
        "lecritique_replay_evictions_total",
        "lecritique_replay_sample_age_versions_bucket",
        "lecritique_replay_reuse_count_bucket",
    ):
        assert f"{name}{{" in exposition
