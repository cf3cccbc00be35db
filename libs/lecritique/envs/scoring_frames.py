"""The scoring workers' wire format: length-prefixed JSON frames over pipes (``envs/scoring_pool.py``)."""

from __future__ import annotations

import json
import struct
from typing import IO, Any

HEADER = struct.Struct(">I")
"""A frame's length, big-endian, before its JSON payload."""


def read_frame(stream: IO[bytes]) -> Any:
    """One frame, or None at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return json.loads(payload)


def encode_frame(message: Any) -> bytes:
    payload = json.dumps(message).encode()
    return HEADER.pack(len(payload)) + payload
