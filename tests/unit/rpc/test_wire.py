"""Requests serialised with their trajectory columns written straight onto the wire parse to the
very message the protobuf path builds (any protobuf reader sees nothing special); the servers'
reader (``parse_with_trajectories``) reads any encoding as protobuf does, without copying columns."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError

from lecritique.rpc.codec import fill_trajectory_batch, trajectory_batch_from_proto
from lecritique.rpc.wire import ALIGNMENT, parse_with_trajectories, serialize_with_trajectories
from lecritique.trajectory import Trajectory
from lecritique.v1 import policy_pb2, value_pb2


def _trajectories(tokens: int) -> list[Trajectory]:
    rng = np.random.default_rng(tokens)
    return [
        Trajectory(
            "a",
            "t",
            0,
            [1, 2],
            rng.integers(0, 50, tokens),
            rng.random(tokens) < 0.5,
            rng.random(tokens),
            np.zeros(tokens),
            1.0,
            3,
            values=rng.random(tokens),
            metadata={"k": [1]},
        ),
        Trajectory("b", "t", 0, [1, 2], [], [], [], [], 0.0, 3),  # empty completion, no values
        Trajectory(
            "c", "u", 1, [4], [5, 6], [1, 1], [-0.5, -0.25], [0, 0], 0.5, 3, critic_context_ids=[9, 9]
        ),
    ]


def _protobuf_path(request, trajectories):
    expected = type(request)()
    expected.CopyFrom(request)
    fill_trajectory_batch(expected.trajectories, trajectories)
    return expected


def _without_padding(message):
    """The message less the alignment padding (zero bytes, which readers ignore)."""
    assert set(message.trajectories.alignment) <= {0}
    message.trajectories.ClearField("alignment")
    return message


def _evaluate_request(tokens):
    request = value_pb2.EvaluateRequest(actor_description="actor", actor_reward_average=0.25)
    for index in range(3):
        request.inputs.add(context_text=f"context {index}")
    return request


# 40 tokens: one-byte lengths; 70,000: float32 columns of 280 KB, three-byte varint lengths.
@pytest.mark.parametrize("tokens", [40, 70_000])
def test_an_evaluate_request_parses_to_the_protobuf_message(tokens):
    trajectories = _trajectories(tokens)
    request = _evaluate_request(tokens)
    expected = _protobuf_path(request, trajectories)

    parsed = value_pb2.EvaluateRequest.FromString(
        serialize_with_trajectories(request, "trajectories", trajectories)
    )

    assert _without_padding(parsed) == expected
    decoded = trajectory_batch_from_proto(parsed.trajectories)
    assert [t.to_bytes() for t in decoded] == [t.to_bytes() for t in trajectories]


def test_a_train_request_and_an_empty_batch():
    trajectories = [t for t in _trajectories(8) if len(t.token_ids)]
    for t in trajectories:
        t.advantages = np.ones(len(t.token_ids), np.float32)
    request = policy_pb2.TrainRequest(step=7)
    expected = _protobuf_path(request, trajectories)
    parsed = policy_pb2.TrainRequest.FromString(
        serialize_with_trajectories(request, "trajectories", trajectories)
    )
    assert _without_padding(parsed) == expected

    empty = policy_pb2.TrainRequest(step=8)
    assert policy_pb2.TrainRequest.FromString(
        serialize_with_trajectories(empty, "trajectories", [])
    ) == _protobuf_path(empty, [])


def test_a_bad_array_is_refused_before_anything_is_sent():
    bad = _trajectories(4)
    bad[0].values = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match="'values' holds an array of shape"):
        serialize_with_trajectories(value_pb2.EvaluateRequest(), "trajectories", bad)


def _without_data(message):
    if not message.HasField("trajectories"):
        return message
    for field in (
        "prompt_ids",
        "token_ids",
        "policy_mask",
        "logprobs",
        "step_ids",
        "values",
        "advantages",
        "critic_context_ids",
    ):
        if message.trajectories.HasField(field):
            getattr(message.trajectories, field).ClearField("data")
    message.trajectories.ClearField("alignment")
    return message


@pytest.mark.parametrize("tokens", [40, 70_000])
def test_the_servers_reader_views_the_aligned_columns_of_the_received_bytes(tokens):
    trajectories = _trajectories(tokens)
    data = serialize_with_trajectories(_evaluate_request(tokens), "trajectories", trajectories)

    read = parse_with_trajectories(data, value_pb2.EvaluateRequest, "trajectories")

    assert read.message == _without_data(value_pb2.EvaluateRequest.FromString(data))
    decoded = read.trajectories()
    assert [t.to_bytes() for t in decoded] == [t.to_bytes() for t in trajectories]
    received = np.frombuffer(data, np.uint8)
    for array in (
        decoded[0].token_ids,
        decoded[0].logprobs,
        decoded[0].values,
        decoded[2].critic_context_ids,
    ):
        assert np.shares_memory(array, received), "a view of the received bytes, not a copy"
        assert array.ctypes.data % ALIGNMENT == received.ctypes.data % ALIGNMENT, "the writer aligned it"
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            array[:1] = 0


def test_the_servers_reader_reads_a_plain_protobuf_encoding_and_aligns_what_it_must():
    trajectories = _trajectories(40)
    message = _protobuf_path(_evaluate_request(40), trajectories)
    data = message.SerializeToString()
    read = parse_with_trajectories(data, value_pb2.EvaluateRequest, "trajectories")
    assert read.message == _without_data(value_pb2.EvaluateRequest.FromString(data))
    decoded = read.trajectories()
    assert [t.to_bytes() for t in decoded] == [t.to_bytes() for t in trajectories]
    assert all(
        array.flags.aligned and not array.flags.writeable
        for t in decoded
        for array in (t.token_ids, t.logprobs)
    )


def test_repeated_occurrences_merge_as_protobuf_merges_them():
    """Two requests end to end are one request to protobuf: scalars and lengths concatenate, a
    column's last ``data`` wins (here the second request's, except where it has none)."""
    first = serialize_with_trajectories(_evaluate_request(40), "trajectories", _trajectories(40))
    second_message = _protobuf_path(
        value_pb2.EvaluateRequest(actor_description="later"), _trajectories(6)[2:]
    )
    second = second_message.SerializeToString()
    merged = value_pb2.EvaluateRequest.FromString(first + second)

    read = parse_with_trajectories(first + second, value_pb2.EvaluateRequest, "trajectories")

    assert read.message == _without_data(value_pb2.EvaluateRequest.FromString(first + second))
    assert read.message.actor_description == "later" and len(read.message.trajectories.trajectory_ids) == 4
    for column in ("token_ids", "logprobs", "values", "critic_context_ids"):
        assert bytes(read.columns.get(column, b"")) == getattr(merged.trajectories, column).data, column


def test_every_truncation_fails_as_protobuf_fails_and_names_no_wrong_message():
    data = serialize_with_trajectories(_evaluate_request(40), "trajectories", _trajectories(40))
    for cut in range(len(data)):
        prefix = data[:cut]
        try:
            expected = value_pb2.EvaluateRequest.FromString(prefix)
        except DecodeError:
            with pytest.raises((ValueError, DecodeError)):
                parse_with_trajectories(prefix, value_pb2.EvaluateRequest, "trajectories")
            continue
        read = parse_with_trajectories(prefix, value_pb2.EvaluateRequest, "trajectories")
        assert read.message == _without_data(expected), cut


def test_a_column_whose_bytes_do_not_match_its_lengths_is_refused_by_name():
    request = _protobuf_path(_evaluate_request(40), _trajectories(40))
    request.trajectories.logprobs.data = request.trajectories.logprobs.data[:-4]
    read = parse_with_trajectories(request.SerializeToString(), value_pb2.EvaluateRequest, "trajectories")
    with pytest.raises(ValueError, match="field 'logprobs' needs"):
        read.trajectories()


def test_every_column_size_is_written_aligned_across_varint_boundaries():
    """The batch record's length grows a byte at 128, 16384, ...: padding must still reach every
    alignment (30 and 114 tokens put a column's record right at such a boundary)."""
    for tokens in [*range(0, 3000), *range(16_000, 17_000)]:
        trajectories = [
            Trajectory(
                "a",
                "t",
                0,
                [1],
                np.arange(tokens),
                np.ones(tokens, bool),
                np.zeros(tokens),
                np.zeros(tokens),
                1.0,
                0,
            )
        ]
        data = serialize_with_trajectories(value_pb2.EvaluateRequest(), "trajectories", trajectories)
        read = parse_with_trajectories(data, value_pb2.EvaluateRequest, "trajectories")
        received = np.frombuffer(data, np.uint8)
        for column in read.columns.values():
            offset = np.frombuffer(column, np.uint8).ctypes.data - received.ctypes.data
            assert offset % ALIGNMENT == 0, tokens
        assert read.trajectories()[0].token_ids.tolist() == list(range(tokens))
