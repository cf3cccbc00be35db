"""The value evaluator's reading of an EvaluateRequest: trajectories column by column, inputs beside them."""

from __future__ import annotations

import numpy as np
import pytest

from lecritique.rpc.codec import fill_trajectory_batch
from lecritique.rpc.wire import WireRequest, parse_with_trajectories
from lecritique.trajectory import Trajectory
from lecritique.v1 import value_pb2
from services.value_evaluator.server import critic_queries


def _request(count: int, inputs: int) -> WireRequest[value_pb2.EvaluateRequest]:
    trajectories = [
        Trajectory(
            f"t{i}",
            "task",
            0,
            [1, 2],
            np.arange(i + 1),
            np.ones(i + 1, bool),
            np.zeros(i + 1),
            np.zeros(i + 1),
            1.0,
            2,
            critic_context_ids=[5, 6] if i else None,
        )
        for i in range(count)
    ]
    request = value_pb2.EvaluateRequest()
    for i in range(inputs):
        item = request.inputs.add(context_text=f"context {i}")
        item.peers.add(trajectory_id=f"peer of {i}", summary="s", reward=0.5)
    fill_trajectory_batch(request.trajectories, trajectories)
    return parse_with_trajectories(request.SerializeToString(), value_pb2.EvaluateRequest, "trajectories")


def test_each_trajectory_meets_its_input_context_and_peers():
    queries = critic_queries(_request(3, 3))
    assert [q.trajectory.trajectory_id for q in queries] == ["t0", "t1", "t2"]
    assert [q.context_text for q in queries] == ["context 0", "context 1", "context 2"]
    assert queries[2].peers[0].trajectory_id == "peer of 2" and len(queries[2].trajectory.token_ids) == 3
    assert queries[0].trajectory.critic_context_ids is None and queries[
        1
    ].trajectory.critic_context_ids.tolist() == [5, 6]


def test_inputs_and_trajectories_that_do_not_pair_up_are_refused():
    with pytest.raises(ValueError, match="2 inputs for 3 trajectories"):
        critic_queries(_request(3, 2))
