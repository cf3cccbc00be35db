"""Requests serialised with their trajectory columns written straight onto the wire parse to the
very message the protobuf path builds (any protobuf reader sees nothing special)."""

from __future__ import annotations

import numpy as np
import pytest

from lecritique.rpc.codec import fill_trajectory_batch, trajectory_batch_from_proto
from lecritique.rpc.wire import serialize_with_trajectories
from lecritique.trajectory import Trajectory
from lecritique.v1 import policy_pb2, value_pb2


def _trajectories(tokens: int) -> list[Trajectory]:
    rng = np.random.default_rng(tokens)
    return [
        Trajectory("a", "t", 0, [1, 2], rng.integers(0, 50, tokens), rng.random(tokens) < 0.5, rng.random(tokens),
                   np.zeros(tokens), 1.0, 3, values=rng.random(tokens), metadata={"k": [1]}),
        Trajectory("b", "t", 0, [1, 2], [], [], [], [], 0.0, 3),  # empty completion, no values
        Trajectory("c", "u", 1, [4], [5, 6], [1, 1], [-0.5, -0.25], [0, 0], 0.5, 3, critic_context_ids=[9, 9]),
    ]


def _protobuf_path(request, trajectories):
    expected = type(request)()
    expected.CopyFrom(request)
    fill_trajectory_batch(expected.trajectories, trajectories)
    return expected


# 40 tokens: one-byte lengths; 70,000: float32 columns of 280 KB, three-byte varint lengths.
@pytest.mark.parametrize("tokens", [40, 70_000])
def test_an_evaluate_request_parses_to_the_protobuf_message(tokens):
    trajectories = _trajectories(tokens)
    request = value_pb2.EvaluateRequest(actor_description="actor", actor_reward_average=0.25)
    for index in range(3):
        request.inputs.add(context_text=f"context {index}")
    expected = _protobuf_path(request, trajectories)

    parsed = value_pb2.EvaluateRequest.FromString(serialize_with_trajectories(request, "trajectories", trajectories))

    assert parsed == expected
    decoded = trajectory_batch_from_proto(parsed.trajectories)
    assert [t.to_bytes() for t in decoded] == [t.to_bytes() for t in trajectories]


def test_a_train_request_and_an_empty_batch():
    trajectories = [t for t in _trajectories(8) if len(t.token_ids)]
    for t in trajectories:
        t.advantages = np.ones(len(t.token_ids), np.float32)
    request = policy_pb2.TrainRequest(step=7)
    expected = _protobuf_path(request, trajectories)
    assert policy_pb2.TrainRequest.FromString(serialize_with_trajectories(request, "trajectories", trajectories)) == expected

    empty = policy_pb2.TrainRequest(step=8)
    assert policy_pb2.TrainRequest.FromString(serialize_with_trajectories(empty, "trajectories", [])) == _protobuf_path(empty, [])


def test_a_bad_array_is_refused_before_anything_is_sent():
    bad = _trajectories(4)
    bad[0].values = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match="'values' holds an array of shape"):
        serialize_with_trajectories(value_pb2.EvaluateRequest(), "trajectories", bad)
