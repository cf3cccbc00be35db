"""FIFO, reuse and age semantics of the replay buffer against a real redis-server."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import redis

from lecritique.replay import ReplayBuffer, ReplayConfigError, ReplayStats
from lecritique.trajectory import Trajectory

NEVER_EVICTED_BY_REUSE = 10**9


def _payloads(count: int, start: int = 0) -> list[bytes]:
    return [f"entry-{index}".encode() for index in range(start, start + count)]


def _held_ids(buffer: ReplayBuffer[bytes], redis_db: redis.Redis) -> list[str]:
    """Ids in FIFO order, read straight from the stream."""
    return [entry_id.decode() for entry_id, _ in redis_db.xrange(buffer.keys.stream)]


def test_fifo_capacity_evicts_oldest_entries_first(make_buffer, redis_db):
    buffer = make_buffer(capacity=4, max_reuse=NEVER_EVICTED_BY_REUSE)
    ids = [buffer.push([payload], policy_version=0)[0] for payload in _payloads(6)]

    assert _held_ids(buffer, redis_db) == ids[2:]
    stats = buffer.stats()
    assert stats.depth == 4
    assert stats.evicted_by_reason == {"capacity": 2, "reuse": 0, "age": 0}
    # The index and counters follow the stream: evicted ids are gone everywhere.
    assert sorted(member.decode() for member in redis_db.zrange(buffer.keys.index, 0, -1)) == sorted(ids[2:])
    assert {entry.payload for entry in buffer.sample(10)} == set(_payloads(6)[2:])


def test_fifo_eviction_ignores_use_counts(make_buffer, redis_db):
    buffer = make_buffer(capacity=3, max_reuse=NEVER_EVICTED_BY_REUSE)
    first = buffer.push(_payloads(3), policy_version=0)
    buffer.sample(3)  # every entry now has one use; the oldest must still go first
    newer = buffer.push(_payloads(2, start=3), policy_version=0)
    assert _held_ids(buffer, redis_db) == [first[2], *newer]
    assert buffer.stats().reuse_histogram == {0: 2, 1: 1}


def test_push_larger_than_capacity_keeps_its_newest_entries(make_buffer, redis_db):
    buffer = make_buffer(capacity=3)
    ids = buffer.push(_payloads(5), policy_version=1)
    assert len(ids) == 5
    assert _held_ids(buffer, redis_db) == ids[2:]
    assert buffer.stats().evicted_by_reason["capacity"] == 2


def test_reuse_eviction_happens_at_exactly_max_reuse(make_buffer):
    buffer = make_buffer(max_reuse=3)
    (entry_id,) = buffer.push([b"only"], policy_version=0)

    uses = []
    for expected_depth in (1, 1, 0):
        (entry,) = buffer.sample(5)
        assert entry.id == entry_id
        uses.append(entry.times_used)
        assert len(buffer) == expected_depth
    assert uses == [1, 2, 3]
    assert buffer.sample(5) == []
    assert buffer.stats().evicted_by_reason == {"capacity": 0, "reuse": 1, "age": 0}


def test_max_reuse_one_means_each_entry_is_returned_once(make_buffer):
    buffer = make_buffer(capacity=50, max_reuse=1)
    ids = buffer.push(_payloads(20), policy_version=0)
    seen = [entry.id for _ in range(10) for entry in buffer.sample(3)]
    assert sorted(seen) == sorted(ids)
    assert len(buffer) == 0


def test_age_bound_evicts_and_never_returns_old_entries(make_buffer):
    buffer = make_buffer(max_age_versions=2, max_reuse=NEVER_EVICTED_BY_REUSE)
    buffer.push([b"v1"], policy_version=1)
    buffer.push([b"v3"], policy_version=3)
    buffer.push([b"v5"], policy_version=5)

    # current 5: age of v3 is exactly 2 (kept), age of v1 is 4 (evicted).
    batch = buffer.sample(10, current_policy_version=5)
    assert sorted(entry.payload for entry in batch) == [b"v3", b"v5"]
    stats = buffer.stats()
    assert stats.evicted_by_reason["age"] == 1
    assert stats.oldest_version == 3

    assert buffer.sample(10, current_policy_version=8) == []
    assert buffer.stats().evicted_by_reason["age"] == 3
    assert len(buffer) == 0


def test_entries_newer_than_the_sampler_are_eligible(make_buffer):
    buffer = make_buffer(max_age_versions=0)
    buffer.push([b"new"], policy_version=9)
    assert [entry.payload for entry in buffer.sample(1, current_policy_version=7)] == [b"new"]


def test_empty_buffer(make_buffer):
    buffer = make_buffer()
    assert buffer.sample(8) == []
    assert len(buffer) == 0
    assert buffer.stats() == ReplayStats(
        depth=0,
        evicted_by_reason={"capacity": 0, "reuse": 0, "age": 0},
        oldest_version=None,
        newest_version=None,
        reuse_histogram={},
        pushed_total=0,
        sampled_total=0,
    )
    assert buffer.push([], policy_version=0) == []
    assert buffer.sample(0) == []


def test_n_larger_than_depth_returns_every_entry_once(make_buffer):
    buffer = make_buffer(max_reuse=5)
    ids = buffer.push(_payloads(7), policy_version=0)
    batch = buffer.sample(100)
    assert sorted(entry.id for entry in batch) == sorted(ids)
    assert {entry.times_used for entry in batch} == {1}


def test_one_sample_never_repeats_an_entry(make_buffer):
    buffer = make_buffer(capacity=40, max_reuse=NEVER_EVICTED_BY_REUSE)
    buffer.push(_payloads(40), policy_version=0)
    for _ in range(50):
        ids = [entry.id for entry in buffer.sample(25)]
        assert len(set(ids)) == 25


def test_sampling_is_uniform(make_buffer):
    buffer = make_buffer(capacity=8, max_reuse=NEVER_EVICTED_BY_REUSE)
    buffer.push(_payloads(8), policy_version=0)
    draws = 3000
    counts = Counter(entry.payload for _ in range(draws) for entry in buffer.sample(2))
    # Each entry is in a draw with probability 1/4: Binomial(3000, 0.25), mean 750, sd 23.7.
    assert len(counts) == 8
    assert all(abs(count - 750) < 120 for count in counts.values()), counts


def test_per_entry_policy_versions_and_stats(make_buffer):
    buffer = make_buffer(capacity=10, max_reuse=3)
    buffer.push(_payloads(4), policy_version=np.array([4, 2, 7, 5]))
    buffer.sample(4)
    buffer.sample(2)
    stats = buffer.stats()
    assert (stats.oldest_version, stats.newest_version) == (2, 7)
    assert stats.reuse_histogram == {1: 2, 2: 2}
    assert stats.pushed_total == 4
    assert stats.sampled_total == 6


def _trajectory(length: int, policy_version: int) -> Trajectory:
    rng = np.random.default_rng(policy_version)
    return Trajectory(
        trajectory_id=f"t{policy_version}",
        task_id="task",
        group_id=0,
        prompt_ids=rng.integers(0, 50_000, size=16),
        token_ids=rng.integers(0, 50_000, size=length),
        policy_mask=np.ones(length, dtype=bool),
        logprobs=rng.normal(size=length),
        step_ids=np.zeros(length),
        reward=1.0,
        policy_version=policy_version,
        values=rng.random(length),
    )


def test_trajectories_round_trip_and_are_stored_as_packed_bytes(redis_db, make_buffer):
    buffer = make_buffer(decode=Trajectory.from_bytes)
    trajectory = _trajectory(length=1000, policy_version=3)
    (entry_id,) = buffer.push([trajectory], policy_version=trajectory.policy_version)

    ((_, fields),) = redis_db.xrange(buffer.keys.stream)
    stored = fields[b"p"]
    assert stored == trajectory.to_bytes()
    # 1000 int32 ids + 1000 float32 logprobs + 1000 float32 values + mask + steps, packed:
    # ~ 14 KB. A JSON list of the same numbers would be several times that.
    json_size = len(
        json.dumps([trajectory.token_ids.tolist(), trajectory.logprobs.tolist(), trajectory.values.tolist()])
    )
    assert len(stored) < 4 * 1000 * 3 + 1000 + 4 * 1000 + 1024 < json_size
    assert fields[b"v"] == b"3"

    (entry,) = buffer.sample(1)
    assert entry.id == entry_id
    assert isinstance(entry.payload, Trajectory)
    np.testing.assert_array_equal(entry.payload.token_ids, trajectory.token_ids)
    np.testing.assert_array_equal(entry.payload.values, trajectory.values)


def test_keys_live_under_the_experiment_prefix(redis_db, make_buffer):
    buffer = make_buffer(experiment="exp1")
    buffer.push([b"x"], policy_version=0)
    buffer.sample(1)
    keys = sorted(key.decode() for key in redis_db.keys("*"))
    assert buffer.keys.stream == "lecritique:exp1:replay"
    assert redis_db.type("lecritique:exp1:replay") == b"stream"
    assert all(
        key == "lecritique:exp1:replay" or key.startswith("lecritique:exp1:replay:") for key in keys
    ), keys


def test_experiments_are_isolated(redis_db):
    first = ReplayBuffer(redis_db, "first", capacity=2)
    second = ReplayBuffer(redis_db, "second", capacity=2)
    first.push(_payloads(2), policy_version=0)
    assert second.sample(5) == []
    assert len(first) == 2


def test_settings_must_agree_across_clients(redis_db):
    replica = ReplayBuffer(redis_db, "shared", capacity=8, max_reuse=2)
    with pytest.raises(ReplayConfigError, match="max_reuse is 2 in Redis but 3"):
        ReplayBuffer(redis_db, "shared", capacity=8, max_reuse=3)
    changed = ReplayBuffer(redis_db, "shared", capacity=8, max_reuse=3, reconfigure=True)
    changed.push([b"x"], policy_version=0)
    # A replica still running the old settings is stopped at its next call and writes nothing.
    with pytest.raises(ReplayConfigError, match="max_reuse"):
        replica.sample(1)
    with pytest.raises(ReplayConfigError, match="max_reuse"):
        replica.push([b"y"], policy_version=0)
    assert len(changed) == 1
    assert changed.stats().reuse_histogram == {0: 1}


def test_idempotent_push_stores_once(make_buffer):
    buffer = make_buffer()
    first = buffer.push(_payloads(3), policy_version=0, idempotency_key="batch-17")
    again = buffer.push(_payloads(3), policy_version=0, idempotency_key="batch-17")
    assert again == first
    assert len(buffer) == 3
    assert buffer.stats().pushed_total == 3


def test_clear_removes_everything(redis_db, make_buffer):
    buffer = make_buffer()
    buffer.push(_payloads(3), policy_version=0)
    buffer.sample(1)
    buffer.clear()
    assert [key for key in redis_db.keys("*") if b":push:" not in key] == []
    assert buffer.sample(1) == []
