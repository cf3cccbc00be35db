"""Persistence across redis-server restarts, reconnecting, and failing clearly when Redis is gone."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import redis

from lecritique.redis_connection import (
    RedisUnavailableError,
    RetryPolicy,
    connect_redis,
    start_embedded_redis,
)
from lecritique.replay import ReplayBuffer

QUICK_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)
PATIENT_RETRY = RetryPolicy(max_attempts=40, initial_backoff_s=0.05, max_backoff_s=0.2)


def _contents(buffer):
    """Everything a restart must preserve: entries with payloads and versions, counters, totals."""
    client = buffer._redis
    return {
        "entries": client.xrange(buffer.keys.stream),
        "index": client.zrange(buffer.keys.index, 0, -1, withscores=True),
        "uses": client.hgetall(buffer.keys.uses),
        "stats": buffer.stats(),
    }


def _fill(buffer):
    ids = buffer.push([f"entry-{index}".encode() * 50 for index in range(30)], policy_version=list(range(30)))
    buffer.sample(10, current_policy_version=30)
    buffer.sample(10, current_policy_version=30)
    return ids


@pytest.mark.parametrize(
    ("appendfsync", "stop"),
    [("everysec", "graceful"), ("always", "kill -9")],
)
def test_entries_and_counters_survive_a_restart(tmp_path, appendfsync, stop):
    server = start_embedded_redis(tmp_path / "data", appendfsync=appendfsync)
    try:
        client = server.client()
        buffer = ReplayBuffer(client, "restart", capacity=100, max_reuse=2)
        _fill(buffer)
        before = _contents(buffer)
        assert before["stats"].depth > 0 and before["uses"], "the test needs used and unused entries"
        if stop == "graceful":
            server.stop()
        else:
            server.kill()  # a crash: only what was fsynced survives; with 'always' that is every reply
        client.close()

        server = start_embedded_redis(tmp_path / "data", port=server.port, appendfsync=appendfsync)
        after_client = server.client()
        buffer = ReplayBuffer(after_client, "restart", capacity=100, max_reuse=2)
        assert _contents(buffer) == before
        # The counters still bind: an entry used once can be returned exactly once more.
        used_once = {key.decode() for key, value in before["uses"].items() if value == b"1"}
        returned = [entry for entry in buffer.sample(100) if entry.id in used_once]
        assert len(returned) == len(used_once)
        assert all(entry.times_used == 2 for entry in returned)
        after_client.close()
    finally:
        server.stop()


def test_client_reconnects_with_backoff_after_a_restart(tmp_path, caplog):
    server = start_embedded_redis(tmp_path / "data")
    try:
        client = server.client()
        buffer = ReplayBuffer(client, "reconnect", capacity=100, max_reuse=2, retry=PATIENT_RETRY)
        first = buffer.push([b"before"], policy_version=0)
        server.stop()

        restarted: list = []
        restart = threading.Thread(
            target=lambda: (
                time.sleep(0.5),
                restarted.append(start_embedded_redis(tmp_path / "data", port=server.port)),
            )
        )
        restart.start()
        with caplog.at_level(logging.INFO, logger="lecritique.redis_reconnect"):
            second = buffer.push([b"after"], policy_version=1)  # blocks, retrying, until the server is back
        restart.join()
        server = restarted[0]

        reconnect_lines = [
            record.getMessage() for record in caplog.records if "reconnecting in" in record.getMessage()
        ]
        assert reconnect_lines, "no log line for the reconnect attempts"
        assert f"127.0.0.1:{server.port}" in reconnect_lines[0]
        assert any("Reconnected to Redis" in record.getMessage() for record in caplog.records)
        assert sorted(entry.id for entry in buffer.sample(5)) == sorted(first + second)
        client.close()
    finally:
        server.stop()


def test_unreachable_redis_raises_after_the_retry_budget_and_stores_nothing(tmp_path):
    server = start_embedded_redis(tmp_path / "data")
    try:
        client = server.client()
        buffer = ReplayBuffer(client, "down", capacity=100, max_reuse=2, retry=QUICK_RETRY)
        buffer.push([b"kept"], policy_version=0)
        server.stop()

        with pytest.raises(
            RedisUnavailableError, match=rf"redis://127\.0\.0\.1:{server.port}/0 .*gave up after 3 attempts"
        ):
            buffer.push([b"lost"], policy_version=1)
        with pytest.raises(RedisUnavailableError, match="replay sample"):
            buffer.sample(1)

        server = start_embedded_redis(tmp_path / "data", port=server.port)
        assert [entry.payload for entry in buffer.sample(5)] == [b"kept"]
        assert buffer.stats().pushed_total == 1
        client.close()
    finally:
        server.stop()


def test_connect_redis_names_the_url_it_cannot_reach(monkeypatch):
    with pytest.raises(RedisUnavailableError, match=r"redis://127\.0\.0\.1:1/0 unreachable during connect"):
        connect_redis("redis://127.0.0.1:1/0", retry=QUICK_RETRY)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    with pytest.raises(RedisUnavailableError, match=r"127\.0\.0\.1:1"):
        connect_redis(retry=QUICK_RETRY)


def test_connect_redis_starts_one_embedded_server_per_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    first = connect_redis(data_dir=tmp_path / "embedded")
    second = connect_redis(data_dir=tmp_path / "embedded")
    assert first.connection_pool.connection_kwargs["port"] == second.connection_pool.connection_kwargs["port"]
    first.set("shared", "yes")
    assert second.get("shared") == b"yes"
    assert first.config_get("appendonly") == {"appendonly": "yes"}
    first.close()
    second.close()


def test_push_retried_after_a_lost_reply_is_stored_once(make_buffer, redis_db):
    buffer = make_buffer(capacity=100, retry=QUICK_RETRY)
    real_script = buffer._push_script
    attempts = []

    def reply_lost_once(**kwargs):
        result = real_script(**kwargs)  # the server ran the script ...
        attempts.append(result)
        if len(attempts) == 1:
            raise redis.ConnectionError("connection reset after the script ran")  # ... the reply never came
        return result

    buffer._push_script = reply_lost_once
    ids = buffer.push([b"a", b"b", b"c"], policy_version=0)

    assert len(attempts) == 2
    assert [entry_id.decode() for entry_id, _ in redis_db.xrange(buffer.keys.stream)] == ids
    assert buffer.stats().pushed_total == 3
