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

The servers read such requests the other way round (:func:`parse_with_trajectories`): protobuf
parses the request with the columns' ``data`` records cut out, and each column's array is a
read-only view of the received bytes. Reading a bytes field out of a parsed message copies it
again, into a fresh multi-MB buffer each time; parse and decode took as long as the raw gRPC call
on the transport benchmark. Each column's data is written 8-byte aligned (a padding record of
``TrajectoryBatch.alignment`` before it), so the views are aligned arrays; a column another writer
left unaligned is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from lecritique.rpc.codec import fill_trajectory_batch, trajectory_batch_from_proto
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2

_LENGTH_DELIMITED = 2
_BATCH_FIELDS = {field.name: field.number for field in common_pb2.TrajectoryBatch.DESCRIPTOR.fields}
_DATA_FIELD = common_pb2.RaggedArray.DESCRIPTOR.fields_by_name["data"].number
_ALIGNMENT_FIELD = _BATCH_FIELDS["alignment"]
_COLUMN_FIELDS = {
    field.number: field.name
    for field in common_pb2.TrajectoryBatch.DESCRIPTOR.fields
    if field.message_type is common_pb2.RaggedArray.DESCRIPTOR
}
_DATA_ONLY = frozenset({_DATA_FIELD})
ALIGNMENT = 8
M = TypeVar("M", bound=Message)


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
    position = len(parts[0])
    for name, arrays in columns.items():
        size = sum(array.nbytes for array in arrays)
        if not size:
            continue
        data_head = _record_head(_DATA_FIELD, size)
        column_head = _record_head(_BATCH_FIELDS[name], len(data_head) + size)
        head = _aligned_head(batch_field, position, column_head + data_head, size)
        parts.append(head)
        parts.extend(arrays)  # bytes.join reads C-contiguous arrays through the buffer protocol
        position += len(head) + size
    return b"".join(parts)


def _aligned_head(batch_field: int, position: int, heads: bytes, size: int) -> bytes:
    """The batch record's head, a padding record and ``heads``, so that the data following them
    starts at a multiple of :data:`ALIGNMENT` bytes into the message.

    Each padding byte moves the data by one, except where the batch record's length varint grows
    a byte (at 128, 16384, ...), which moves it by two and may step over the aligned position:
    ``2 * ALIGNMENT`` paddings reach it after such a step too."""
    for padding in range(2 * ALIGNMENT):
        pad = _record_head(_ALIGNMENT_FIELD, padding) + bytes(padding)
        head = _record_head(batch_field, len(pad) + len(heads) + size) + pad + heads
        if (position + len(head)) % ALIGNMENT == 0:
            return head
    raise AssertionError(
        f"no padding of 0-{2 * ALIGNMENT - 1} bytes aligns the data"
    )  # unreachable, see above


def bytes_request_stub(
    stub_factory: Callable[[grpc.Channel], Any], service: str, responses: Mapping[str, type[Message]]
) -> Callable[[grpc.Channel], Any]:
    """A factory of ``stub_factory``'s stubs whose methods in ``responses`` take serialised requests
    (bytes from :func:`serialize_with_trajectories`) and still return parsed responses."""

    def factory(channel: grpc.Channel) -> Any:
        stub = stub_factory(channel)
        for method, response in responses.items():
            setattr(
                stub,
                method,
                channel.unary_unary(
                    f"/{service}/{method}", request_serializer=None, response_deserializer=response.FromString
                ),
            )
        return stub

    return factory


def _varint_at(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("truncated message: a varint runs past the end")
        byte = data[position]
        result |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise ValueError("malformed message: a varint longer than 10 bytes")


def _records(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each record of the message in ``data[start:end]``: (field number, wire type, record start,
    value start, record end). Length-delimited values are skipped over, not read."""
    position = start
    while position < end:
        record = position
        key, position = _varint_at(data, position)
        number, wire_type = key >> 3, key & 7
        value = position
        if wire_type == 0:
            _, position = _varint_at(data, position)
        elif wire_type == 1:
            position += 8
        elif wire_type == 5:
            position += 4
        elif wire_type == _LENGTH_DELIMITED:
            length, value = _varint_at(data, position)
            position = value + length
        else:
            raise ValueError(
                f"malformed message: wire type {wire_type} of field {number} (groups are not used here)"
            )
        if position > end:
            raise ValueError(f"truncated message: field {number} runs past the end of its message")
        yield number, wire_type, record, value, position


def _rewrite(
    data: bytes,
    start: int,
    end: int,
    inner: Mapping[int, Callable[[int, int], bytes]],
    drop: frozenset[int] = frozenset(),
    on_drop: Callable[[int, int], None] | None = None,
) -> bytes:
    """The message in ``data[start:end]`` with each length-delimited field in ``inner`` replaced by
    what its function returns for the value's span, and the fields in ``drop`` left out (their
    value's span handed to ``on_drop``, in order)."""
    pieces: list[Any] = []
    view = memoryview(data)
    kept = start
    for number, wire_type, record, value, record_end in _records(data, start, end):
        if wire_type != _LENGTH_DELIMITED or (number not in inner and number not in drop):
            continue
        pieces.append(view[kept:record])
        if number in inner:
            body = inner[number](value, record_end)
            pieces.append(_record_head(number, len(body)) + body)
        elif on_drop is not None:
            on_drop(value, record_end)
        kept = record_end
    pieces.append(view[kept:end])
    return b"".join(pieces)


@dataclass(frozen=True)
class WireRequest(Generic[M]):
    """A request parsed by :func:`parse_with_trajectories`: the message without its trajectory
    columns' bytes, and those bytes as views of the received request."""

    message: M
    field: str
    columns: Mapping[str, memoryview]

    def trajectories(self) -> list[Trajectory]:
        """The batch's trajectories, their arrays read-only (aligned views where the writer aligned them)."""
        return trajectory_batch_from_proto(
            getattr(self.message, self.field), writable=False, data=self.columns
        )


def parse_with_trajectories(data: bytes, message_type: type[M], field: str) -> WireRequest[M]:
    """Parse serialised ``message_type`` whose TrajectoryBatch field ``field`` may be large, copying
    none of its columns' data. Any valid encoding reads as protobuf would read it: repeated
    occurrences of the batch and its columns merge, the last ``data`` of a column wins."""
    columns: dict[str, memoryview] = {}
    view = memoryview(data)

    def column(name: str) -> Callable[[int, int], bytes]:
        def keep(start: int, end: int) -> None:
            columns[name] = view[start:end]  # the last occurrence wins, as in protobuf

        return lambda start, end: _rewrite(data, start, end, {}, drop=_DATA_ONLY, on_drop=keep)

    def batch(start: int, end: int) -> bytes:
        return _rewrite(
            data,
            start,
            end,
            {number: column(name) for number, name in _COLUMN_FIELDS.items()},
            drop=frozenset({_ALIGNMENT_FIELD}),
        )

    number = message_type.DESCRIPTOR.fields_by_name[field].number
    message = message_type.FromString(_rewrite(data, 0, len(data), {number: batch}))
    return WireRequest(message, field, columns)


def add_servicer(
    server: grpc.Server, servicer: Any, service: ServiceDescriptor, trajectory_fields: Mapping[str, str]
) -> None:
    """Register ``servicer``'s unary methods of ``service`` as the generated ``add_*_to_server``
    does, except that each method named in ``trajectory_fields`` gets a :class:`WireRequest` whose
    trajectories in that field are read without copying their arrays."""
    handlers = {}
    for method in service.methods:
        if method.client_streaming or method.server_streaming:
            raise ValueError(
                f"{service.full_name}.{method.name} streams; only unary methods are supported here"
            )
        request, response = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
        parse: Callable[[bytes], Any] = request.FromString
        if method.name in trajectory_fields:
            parse = _parser(request, trajectory_fields[method.name])
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=parse,
            response_serializer=response.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def _parser(message_type: type[Message], field: str) -> Callable[[bytes], WireRequest[Any]]:
    return lambda data: parse_with_trajectories(data, message_type, field)
