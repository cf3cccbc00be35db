"""Requests that carry a :class:`~lecritique.v1.common_pb2.TrajectoryBatch`, serialised with each
array column written once, straight from the trajectories' arrays onto the wire.

Building the message and then serialising it copies a rollout batch's bytes three times (joining
a column, assigning it to the message, serialising the message), each into fresh multi-MB
buffers; on the transport benchmark that was about as long as the gRPC call itself. Here the
message is serialised without the columns' bytes, and each column follows as a second occurrence
of its fields holding only ``data``: protobuf parsers merge repeated occurrences of a message
field (protobuf.dev, "Encoding": last one wins, messages merge), so any client in any language
reads the same message :func:`~lecritique.rpc.codec.fill_trajectory_batch` would build. The
clients that send such requests use a stub whose method takes bytes (:func:`bytes_request_stub`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from lecritique.rpc.codec import fill_trajectory_batch
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2

_LENGTH_DELIMITED = 2
_BATCH_FIELDS = {field.name: field.number for field in common_pb2.TrajectoryBatch.DESCRIPTOR.fields}
_DATA_FIELD = common_pb2.RaggedArray.DESCRIPTOR.fields_by_name["data"].number


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _record_head(field_number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field whose ``length`` bytes follow."""
    return _varint((field_number << 3) | _LENGTH_DELIMITED) + _varint(length)


def serialize_with_trajectories(message: Message, field: str, trajectories: Sequence[Trajectory]) -> bytes:
    """``message`` with ``trajectories`` in its TrajectoryBatch field ``field``, serialised.

    Parses to the message ``fill_trajectory_batch(getattr(message, field), trajectories)`` builds;
    ``message`` itself is changed only in that field's scalars and lengths."""
    columns = fill_trajectory_batch(getattr(message, field), trajectories, data=False)
    batch_field = message.DESCRIPTOR.fields_by_name[field].number
    parts: list[Any] = [message.SerializeToString()]
    for name, arrays in columns.items():
        size = sum(array.nbytes for array in arrays)
        if not size:
            continue
        data_head = _record_head(_DATA_FIELD, size)
        column_head = _record_head(_BATCH_FIELDS[name], len(data_head) + size)
        parts.append(_record_head(batch_field, len(column_head) + len(data_head) + size) + column_head + data_head)
        parts.extend(array.data for array in arrays)
    return b"".join(parts)


def bytes_request_stub(
    stub_factory: Callable[[grpc.Channel], Any], service: str, responses: Mapping[str, type[Message]]
) -> Callable[[grpc.Channel], Any]:
    """A factory of ``stub_factory``'s stubs whose methods in ``responses`` take serialised requests
    (bytes from :func:`serialize_with_trajectories`) and still return parsed responses."""

    def factory(channel: grpc.Channel) -> Any:
        stub = stub_factory(channel)
        for method, response in responses.items():
            setattr(stub, method, channel.unary_unary(
                f"/{service}/{method}", request_serializer=None, response_deserializer=response.FromString
            ))
        return stub

    return factory
