import numpy as np
import pytest

from lecritique.envs.base import EpisodeState, Task
from lecritique.rpc.codec import (
    episode_from_proto,
    episode_to_proto,
    from_tensor,
    task_from_proto,
    task_to_proto,
    to_tensor,
    trajectory_from_proto,
    trajectory_to_proto,
)
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2


@pytest.mark.parametrize("dtype", ["int32", "float32", "bool", "float64", "int64"])
def test_tensor_round_trip_is_raw_bytes(dtype):
    array = (np.arange(24).reshape(2, 3, 4) % 2).astype(dtype)
    tensor = to_tensor(array)
    assert tensor.data == array.tobytes() and list(tensor.shape) == [2, 3, 4]
    np.testing.assert_array_equal(from_tensor(tensor), array)


def test_unset_tensor_is_none_and_bad_tensors_are_named():
    assert from_tensor(common_pb2.Tensor()) is None
    with pytest.raises(ValueError, match="needs 16 bytes"):
        from_tensor(common_pb2.Tensor(dtype="float32", shape=[4], data=b"\0" * 12))
    with pytest.raises(ValueError, match="dtype"):
        from_tensor(common_pb2.Tensor(dtype="complex64", shape=[1], data=b"\0" * 8))


def test_trajectory_round_trip():
    trajectory = Trajectory(
        trajectory_id="b0-1-2", task_id="t", group_id=1, prompt_ids=[1, 2], token_ids=[3, 4, 5],
        policy_mask=[1, 0, 1], logprobs=[-1.0, 0.0, -2.0], step_ids=[0, 1, 1], reward=1.0, policy_version=3,
        values=[0.1, 0.2, 0.3], value_version=4, critic_context_ids=[7], metadata={"turns": 2},
    )
    restored = trajectory_from_proto(trajectory_to_proto(trajectory))
    assert restored.to_bytes() == trajectory.to_bytes()


def test_missing_required_array_is_named():
    message = trajectory_to_proto(
        Trajectory("x", "t", 0, [1], [2], [1], [0.0], [0], 0.0, 0)
    )
    message.ClearField("token_ids")
    with pytest.raises(ValueError, match="token_ids"):
        trajectory_from_proto(message)


def test_task_and_episode_round_trip():
    task = Task("sudoku-1", "1.\n", None, {"solution": "12\n"}, {"grid": [[1, 0]]})
    assert task_from_proto(task_to_proto(task)) == task
    with_reference = Task("a", "2+2=", "4", {"answer": "4"})
    assert task_from_proto(task_to_proto(with_reference)).reference == "4"
    state = EpisodeState(task=task, observation="obs", turn=2, done=False, data={"grid": [[1, 2]]})
    assert episode_from_proto(episode_to_proto(state)) == state
