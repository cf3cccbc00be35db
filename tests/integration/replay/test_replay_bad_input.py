"""Bad input gets a clear error naming the value, and leaves the buffer unchanged."""

from __future__ import annotations

import pydantic
import pytest

from lecritique.replay import ReplayBuffer, ReplayConfigError


class _Record:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def to_bytes(self) -> bytes:
        return self.data


class _BrokenRecord:
    def to_bytes(self) -> str:
        return "not bytes"


def _snapshot(buffer, redis_db):
    return buffer.stats(), redis_db.xrange(buffer.keys.stream), redis_db.hgetall(buffer.keys.uses)


def test_oversized_payload_is_rejected_and_nothing_is_pushed(make_buffer, redis_db):
    buffer = make_buffer(max_payload_bytes=1024)
    buffer.push([b"kept"], policy_version=0)
    before = _snapshot(buffer, redis_db)

    with pytest.raises(ValueError, match=r"payload 1 is 1025 bytes, over max_payload_bytes=1024"):
        buffer.push([b"small", b"x" * 1025, b"small"], policy_version=1)
    with pytest.raises(ValueError, match="payload 0 is 2048 bytes"):
        buffer.push([_Record(b"y" * 2048)], policy_version=1)

    assert _snapshot(buffer, redis_db) == before
    buffer.push([b"z" * 1024], policy_version=1)  # exactly at the limit is fine
    assert len(buffer) == 2


@pytest.mark.parametrize(
    ("payloads", "message"),
    [
        (b"raw bytes", "expects a sequence of payloads, got bytes"),
        ("text", "expects a sequence of payloads, got str"),
        (42, "expects a sequence of payloads, got int"),
        ([b"ok", 7], "payload 1 has type int"),
        ([b"ok", "text"], "payload 1 has type str"),
        ([None], "payload 0 has type NoneType"),
        ([{"token_ids": [1, 2]}], "payload 0 has type dict"),
        ([_BrokenRecord()], r"_BrokenRecord.to_bytes\(\) returned str"),
    ],
)
def test_wrong_payload_types_raise_type_error(make_buffer, redis_db, payloads, message):
    buffer = make_buffer()
    before = _snapshot(buffer, redis_db)
    with pytest.raises(TypeError, match=message):
        buffer.push(payloads, policy_version=0)
    assert _snapshot(buffer, redis_db) == before


@pytest.mark.parametrize(
    ("policy_version", "error", "message"),
    [
        (1.5, TypeError, "policy_version must be an int, got float"),
        ("3", TypeError, "policy_version must be an int, got str"),
        (True, TypeError, "policy_version must be an int, got bool"),
        (None, TypeError, "policy_version must be an int, got NoneType"),
        (-1, ValueError, "policy_version must be >= 0, got -1"),
        ([1, 2], ValueError, "policy_version has 2 entries for 3 payloads"),
        ([1, 2, -5], ValueError, r"policy_version\[2\] must be >= 0"),
    ],
)
def test_bad_policy_versions(make_buffer, redis_db, policy_version, error, message):
    buffer = make_buffer()
    with pytest.raises(error, match=message):
        buffer.push([b"a", b"b", b"c"], policy_version=policy_version)
    assert len(buffer) == 0
    assert redis_db.exists(buffer.keys.stream) == 0


def test_bad_sample_arguments(make_buffer):
    buffer = make_buffer()
    buffer.push([b"a"], policy_version=0)
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        buffer.sample(-1)
    with pytest.raises(TypeError, match="n must be an int, got float"):
        buffer.sample(2.0)
    with pytest.raises(TypeError, match="current_policy_version must be an int, got str"):
        buffer.sample(1, current_policy_version="5")
    aged = make_buffer(experiment="aged", max_age_versions=3)
    with pytest.raises(ValueError, match="current_policy_version is required"):
        aged.sample(1)
    assert buffer.stats().sampled_total == 0


def test_bad_idempotency_key(make_buffer):
    buffer = make_buffer()
    with pytest.raises(ValueError, match="idempotency_key 'a:b'"):
        buffer.push([b"a"], policy_version=0, idempotency_key="a:b")
    assert len(buffer) == 0


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"experiment": "a:b"}, "experiment"),
        ({"experiment": ""}, "experiment"),
        ({"experiment": "x", "capacity": 0}, "capacity"),
        ({"experiment": "x", "max_reuse": 0}, "max_reuse"),
        ({"experiment": "x", "max_age_versions": -1}, "max_age_versions"),
        ({"experiment": "x", "max_payload_bytes": 0}, "max_payload_bytes"),
    ],
)
def test_bad_settings_name_the_field(redis_db, settings, field):
    with pytest.raises(pydantic.ValidationError, match=field):
        ReplayBuffer(redis_db, **settings)
    assert redis_db.keys("*") == []


def test_client_must_be_a_redis_client():
    with pytest.raises(TypeError, match=r"redis_client must be a redis\.Redis"):
        ReplayBuffer("redis://localhost:6379", "x")


def test_foreign_data_under_our_key_is_reported_before_any_write(make_buffer, redis_db):
    buffer = make_buffer()
    redis_db.set(buffer.keys.stream, "someone else's string")
    with pytest.raises(ReplayConfigError, match=r"holds a string, expected a stream"):
        buffer.push([b"a"], policy_version=0)
    assert redis_db.get(buffer.keys.stream) == b"someone else's string"
    assert redis_db.exists(buffer.keys.index) == 0
