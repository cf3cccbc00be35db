"""What the replay buffer hands out and keeps: entries, statistics, keys, and payload checks."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from numbers import Integral
from typing import Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict

from lecritique.replay import scripts

P = TypeVar("P")

_RECORD_HEADER = struct.Struct(scripts.SAMPLE_RECORD_HEADER)


class ReplayConfigError(ValueError):
    """The settings of this client disagree with the ones stored for the experiment, or a key
    of the experiment holds data of the wrong type."""


class ReplayEntry(NamedTuple, Generic[P]):
    """One sampled entry; unpacks as ``(id, payload, times_used)``."""

    id: str
    """Stream entry id (``<ms>-<seq>``), unique within the experiment."""
    payload: P
    """The pushed bytes, or what the buffer's ``decode`` made of them."""
    times_used: int
    """Times the entry has been sampled, this sample included (1 on its first return)."""


class ReplayStats(BaseModel):
    """A consistent snapshot of one experiment's buffer."""

    model_config = ConfigDict(frozen=True)

    depth: int
    """Entries currently held."""
    evicted_by_reason: dict[str, int]
    """Entries evicted so far, by reason: ``capacity``, ``reuse``, ``age``."""
    oldest_version: int | None
    """Smallest policy version held (None: empty)."""
    newest_version: int | None
    """Largest policy version held (None: empty)."""
    reuse_histogram: dict[int, int]
    """Times sampled -> number of entries held that were sampled that often."""
    pushed_total: int
    """Entries ever pushed."""
    sampled_total: int
    """Entries ever returned by ``sample`` (one per entry per sample)."""


@dataclass(frozen=True)
class ReplayKeys:
    """Redis keys of one experiment's buffer (see :mod:`lecritique.replay.scripts`)."""

    stream: str
    index: str
    uses: str
    stats: str
    config: str

    @classmethod
    def for_experiment(cls, experiment: str) -> ReplayKeys:
        base = f"lecritique:{experiment}:replay"
        return cls(
            stream=base,
            index=f"{base}:index",
            uses=f"{base}:uses",
            stats=f"{base}:stats",
            config=f"{base}:config",
        )

    def push_token(self, token: str) -> str:
        return f"{self.stream}:push:{token}"

    def script_keys(self) -> list[str]:
        return [self.stream, self.index, self.uses, self.stats, self.config]


def sample_records(records: bytes) -> Iterator[tuple[str, int, int, bytes]]:
    """``(id, times_used, policy_version, payload)`` of every entry in the sample script's reply."""
    view = memoryview(records)
    offset = 0
    while offset < len(view):
        id_length, used, version, payload_length = _RECORD_HEADER.unpack_from(view, offset)
        offset += _RECORD_HEADER.size
        entry_id = bytes(view[offset : offset + id_length]).decode()
        offset += id_length
        payload = bytes(view[offset : offset + payload_length])
        offset += payload_length
        yield entry_id, used, version, payload


def payload_bytes(payload: object, index: int) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    # int has to_bytes() too, but an int is never a trajectory.
    to_bytes = None if isinstance(payload, (int, float, str)) else getattr(payload, "to_bytes", None)
    if not callable(to_bytes):
        raise TypeError(
            f"payload {index} has type {type(payload).__name__}: expected bytes or an object with "
            "to_bytes() (e.g. lecritique.trajectory.Trajectory)"
        )
    data = to_bytes()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(
            f"payload {index}: {type(payload).__name__}.to_bytes() returned {type(data).__name__}, not bytes"
        )
    return bytes(data)


def non_negative_int(value: object, name: str) -> int:
    """Policy versions and counts: ints (numpy ints too, bools not) >= 0."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    number = int(value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0, got {number}")
    return number


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
