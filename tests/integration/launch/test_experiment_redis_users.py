"""Each experiment's own Redis user reaches its own keys only (issue #46, item 5, security round 4).

Before: every run connected as the shared ``experiments`` user (``~lecritique:exp-*``), so a run's code
could list every key name (``SCAN``, ``RANDOMKEY``: key patterns do not filter what a listing
returns), forge another experiment's metrics and status (``RPUSH lecritique:<bob-id>:metrics``,
``HSET ...:status``), and grow Redis by 256 MiB with one ``SETRANGE``; Redis had no ``maxmemory``.
Now each command of the issue, sent as an experiment's own user (:class:`ExperimentUsers`) to a real
redis-server with the ``--dev`` users and memory limits, is refused, and the API's records survive a
run that fills the server. The chart starts its Redis with the same rules
(``tests/integration/chart/test_chart_redis_auth.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from lecritique.launch import redis_acl
from lecritique.redis_connection import EmbeddedRedis, redis_client, start_embedded_redis

ALICE, BOB = "exp-a11ce00001", "exp-b0b0000002"
RECORD = f"lecritique:api:experiment:{BOB}"


def _start(data: Path, maxmemory: str = "64mb", port: int | None = None) -> EmbeddedRedis:
    return start_embedded_redis(
        data,
        port=port,
        acl=redis_acl.dev_acl("api-secret", "experiments-secret"),
        config=redis_acl.memory_limits(maxmemory),
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    started = _start(tmp_path / "redis")
    yield started
    started.stop()


@pytest.fixture
def api(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis_client(redis_acl.user_url(server.url, redis_acl.API_USER, "api-secret"))
    client.set(RECORD, '{"tenant": "bob", "status": "running"}')
    client.rpush(f"lecritique:{BOB}:metrics", '{"step": 1, "reward_mean": 0.5}')
    client.hset(f"lecritique:{BOB}:status", mapping={"step": 1, "policy_version": 1})
    yield client
    client.close()


@pytest.fixture
def alice(server: EmbeddedRedis, api: redis.Redis) -> Iterator[redis.Redis]:
    users = redis_acl.ExperimentUsers(api, server.url)
    users.ensure(BOB)
    client = redis_client(users.ensure(ALICE))
    yield client
    client.close()


def test_an_experiments_user_is_named_after_it_and_uses_its_own_keys(alice: redis.Redis) -> None:
    assert alice.set(f"lecritique:{ALICE}:probe", "own") is True
    assert alice.get(f"lecritique:{ALICE}:probe") == b"own"
    assert alice.rpush(f"lecritique:{ALICE}:metrics", '{"step": 1}') == 1
    script = alice.register_script("return redis.call('INCR', KEYS[1])")
    assert script(keys=[f"lecritique:{ALICE}:counter"]) == 1  # the replay's Lua scripts run


@pytest.mark.parametrize(
    "command",
    [("SCAN", "0"), ("SCAN", "0", "MATCH", "lecritique:api:*"), ("KEYS", "*"), ("RANDOMKEY",), ("DBSIZE",)],
    ids=lambda command: " ".join(command),
)
def test_no_listing_of_key_names(alice: redis.Redis, command: tuple[str, ...]) -> None:
    with pytest.raises(redis.exceptions.NoPermissionError):
        alice.execute_command(*command)


@pytest.mark.parametrize(
    "command",
    [
        ("RPUSH", f"lecritique:{BOB}:metrics", '{"step": 999, "reward_mean": 1.0}'),
        ("HSET", f"lecritique:{BOB}:status", "step", "999"),
        ("DEL", f"lecritique:{BOB}:metrics"),
        ("LRANGE", f"lecritique:{BOB}:metrics", "0", "-1"),
        ("GET", RECORD),
        ("SET", RECORD, '{"tenant": "bob", "status": "succeeded"}'),
        ("GET", redis_acl.USERS_KEY),
        ("EVAL", "return redis.call('GET', KEYS[1])", "1", RECORD),
        ("SORT", f"lecritique:{ALICE}:list", "BY", "lecritique:api:*"),
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_no_key_of_another_experiment_or_of_the_api(
    alice: redis.Redis, api: redis.Redis, command: tuple[str, ...]
) -> None:
    with pytest.raises(redis.exceptions.NoPermissionError):
        alice.execute_command(*command)
    assert api.lrange(f"lecritique:{BOB}:metrics", 0, -1) == [b'{"step": 1, "reward_mean": 0.5}']
    assert api.hgetall(f"lecritique:{BOB}:status") == {b"step": b"1", b"policy_version": b"1"}
    assert api.get(RECORD) == b'{"tenant": "bob", "status": "running"}'


def test_a_script_cannot_reach_another_key_from_inside(alice: redis.Redis) -> None:
    with pytest.raises(redis.exceptions.ResponseError, match="can.t access|permissions"):
        alice.eval(
            "return redis.call('GET', 'lecritique:api:experiment:exp-b0b0000002')", 1, f"lecritique:{ALICE}:x"
        )


@pytest.mark.parametrize(
    "command",
    [
        ("SETRANGE", f"lecritique:{ALICE}:big", "268435455", "x"),
        ("SETBIT", f"lecritique:{ALICE}:bits", "4294967295", "1"),
        ("BITFIELD", f"lecritique:{ALICE}:bits", "SET", "u8", "4294967200", "1"),
        ("APPEND", f"lecritique:{ALICE}:s", "x"),
        ("SCRIPT", "FLUSH"),
        ("PUBLISH", "lecritique:api", "x"),
        ("PUBSUB", "CHANNELS"),
        ("CONFIG", "SET", "maxmemory", "0"),
        ("ACL", "SETUSER", ALICE, "~*"),
        ("CLIENT", "LIST"),
        ("FLUSHALL",),
        ("INFO",),
        ("MOVE", f"lecritique:{ALICE}:probe", "1"),
    ],
    ids=lambda command: command[0],
)
def test_no_command_that_grows_or_administers_redis(alice: redis.Redis, command: tuple[str, ...]) -> None:
    with pytest.raises(redis.exceptions.NoPermissionError):
        alice.execute_command(*command)


def test_one_argument_over_64_mib_is_refused(alice: redis.Redis, api: redis.Redis) -> None:
    with pytest.raises(redis.exceptions.ConnectionError):
        alice.set(f"lecritique:{ALICE}:huge", b"x" * (65 * 2**20))
    assert api.get(RECORD) is not None


def test_a_run_that_fills_redis_evicts_nothing(alice: redis.Redis, api: redis.Redis) -> None:
    chunk = b"x" * (4 * 2**20)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for index in range(64):  # 256 MiB, four times the server's maxmemory
            alice.rpush(f"lecritique:{ALICE}:fill", chunk)
            assert index < 63
    assert api.get(RECORD) == b'{"tenant": "bob", "status": "running"}'
    assert api.lrange(f"lecritique:{BOB}:metrics", 0, -1) == [b'{"step": 1, "reward_mean": 0.5}']
    alice.delete(f"lecritique:{ALICE}:fill")  # the run's own keys are its to free
    assert api.set(RECORD, '{"tenant": "bob", "status": "running"}') is True


def test_the_password_is_the_same_after_a_restart_and_the_user_is_recreated(tmp_path: Path) -> None:
    server = _start(tmp_path / "redis")
    api = redis_client(redis_acl.user_url(server.url, redis_acl.API_USER, "api-secret"))
    url = redis_acl.ExperimentUsers(api, server.url).ensure(ALICE)
    api.close()
    server.stop()
    server = _start(
        tmp_path / "redis", port=server.port
    )  # the dynamic user is gone; the HMAC key is in the AOF
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis_client(url).ping()
        api = redis_client(redis_acl.user_url(server.url, redis_acl.API_USER, "api-secret"))
        assert redis_acl.ExperimentUsers(api, server.url).ensure(ALICE) == url
        assert redis_client(url).set(f"lecritique:{ALICE}:again", "1") is True
    finally:
        server.stop()


def test_a_deleted_user_is_disconnected(server: EmbeddedRedis, api: redis.Redis, alice: redis.Redis) -> None:
    assert alice.set(f"lecritique:{ALICE}:x", "1") is True
    redis_acl.ExperimentUsers(api, server.url).remove(ALICE)
    with pytest.raises((redis.exceptions.AuthenticationError, redis.exceptions.ConnectionError)):
        alice.get(f"lecritique:{ALICE}:x")


def test_only_experiment_ids_become_users() -> None:
    for name in ("api", "default", "experiments", "exp-a b", "exp-x ~* +@all"):
        with pytest.raises(ValueError, match="experiment id"):
            redis_acl.experiment_rules(name)


def test_re_creating_a_user_keeps_its_open_connections(
    server: EmbeddedRedis, api: redis.Redis, alice: redis.Redis
) -> None:
    """The reconciler re-creates every running experiment's user (a restarted Redis has lost it):
    a run connected meanwhile keeps working."""
    assert alice.set(f"lecritique:{ALICE}:x", "1") is True
    redis_acl.ExperimentUsers(api, server.url).ensure(ALICE)
    assert alice.get(f"lecritique:{ALICE}:x") == b"1"
