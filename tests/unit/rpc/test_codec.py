import numpy as np
import pytest

from lecritique.envs.base import EpisodeState, Task
from lecritique.rpc.codec import (
    episode_from_proto,
    episode_to_proto,
    fill_ragged,
    fill_trajectory_batch,
    from_tensor,
    task_from_proto,
    task_to_proto,
    to_tensor,
    trajectory_batch_from_proto,
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


def _batch() -> list[Trajectory]:
    return [
        Trajectory(
            trajectory_id="b0-1-2",
            task_id="t",
            group_id=1,
            prompt_ids=[1, 2],
            token_ids=[3, 4, 5],
            policy_mask=[1, 0, 1],
            logprobs=[-1.0, 0.0, -2.0],
            step_ids=[0, 1, 1],
            reward=1.0,
            policy_version=3,
            values=[0.1, 0.2, 0.3],
            value_version=4,
            critic_context_ids=[7],
            metadata={"turns": 2},
        ),
        # No values, no context, empty completion: None and length 0 are different things.
        Trajectory("b0-1-3", "t", 1, [1, 2], [], [], [], [], 0.0, 3),
        Trajectory(
            "b0-2-0",
            "u",
            2,
            [9],
            [8, 7],
            [1, 1],
            [-0.5, -0.25],
            [0, 0],
            0.5,
            3,
            values=[0.4, 0.5],
            advantages=[1.0, 1.0],
            critic_context_ids=[],
        ),
    ]


def _encoded(trajectories: list[Trajectory]) -> common_pb2.TrajectoryBatch:
    message = common_pb2.TrajectoryBatch()
    fill_trajectory_batch(message, trajectories)
    return common_pb2.TrajectoryBatch.FromString(message.SerializeToString())


def test_trajectory_batch_round_trip_keeps_every_field_and_none():
    batch = _batch()
    restored = trajectory_batch_from_proto(_encoded(batch))
    assert [t.to_bytes() for t in restored] == [t.to_bytes() for t in batch]
    assert restored[1].values is None and restored[1].critic_context_ids is None
    assert restored[2].critic_context_ids is not None and len(restored[2].critic_context_ids) == 0


def test_trajectory_batch_is_one_bytes_field_per_array_column():
    message = _encoded(_batch())
    assert list(message.token_ids.lengths) == [3, 0, 2] and list(message.values.lengths) == [3, -1, 2]
    assert message.token_ids.data == np.array([3, 4, 5, 8, 7], dtype=np.int32).tobytes()
    assert not message.HasField("advantages") or list(message.advantages.lengths) == [-1, -1, 2]


def test_decoded_arrays_are_writable_and_independent_of_the_message():
    message = _encoded(_batch())
    first, _, last = trajectory_batch_from_proto(message)
    first.token_ids[0] = 99  # stages may edit arrays in place; the neighbour must not change
    assert last.token_ids.tolist() == [8, 7] and np.frombuffer(message.token_ids.data, np.int32)[0] == 3


def test_read_only_decoding_hands_out_the_same_arrays_and_refuses_writes():
    message = _encoded(_batch())
    writable, read_only = (
        trajectory_batch_from_proto(message),
        trajectory_batch_from_proto(message, writable=False),
    )
    assert [t.to_bytes() for t in read_only] == [t.to_bytes() for t in writable]
    with pytest.raises(ValueError, match="read-only"):
        read_only[0].token_ids[0] = 99


def test_an_empty_batch_round_trips():
    assert trajectory_batch_from_proto(_encoded([])) == []


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (
            lambda m: m.ClearField("token_ids"),
            "'token_ids' is required; trajectories without it: \\['b0-1-2'",
        ),
        (
            lambda m: m.token_ids.lengths.__setitem__(1, -1),
            "'token_ids' is required; trajectories without it: \\['b0-1-3'",
        ),
        (lambda m: m.logprobs.lengths.pop(), "'logprobs' has 2 lengths for 3 trajectories"),
        (lambda m: setattr(m.logprobs, "data", m.logprobs.data[:-4]), "'logprobs' needs 20 bytes"),
        (lambda m: setattr(m.values, "dtype", "float64"), "'values' has dtype 'float64', expected 'float32'"),
        (lambda m: m.step_ids.lengths.__setitem__(1, -2), "'step_ids' has a negative length"),
        (lambda m: m.rewards.pop(), "'rewards' has 2 entries for 3 trajectory ids"),
        (
            lambda m: m.policy_mask.lengths.__setitem__(1, 1) or m.policy_mask.lengths.__setitem__(2, 1),
            "'policy_mask' has shape",
        ),
        (
            lambda m: m.rewards.__setitem__(2, float("nan")),
            "trajectory 'b0-2-0': field 'reward' is not finite: nan",
        ),
        (lambda m: m.rewards.__setitem__(0, float("inf")), "field 'reward' is not finite: inf"),
    ],
)
def test_a_malformed_batch_is_named(corrupt, message):
    encoded = _encoded(_batch())
    corrupt(encoded)
    with pytest.raises(ValueError, match=message):
        trajectory_batch_from_proto(encoded)


def test_only_one_dimensional_arrays_travel_in_a_batch():
    with pytest.raises(ValueError, match="'values' holds an array of shape \\(2, 2\\)"):
        fill_ragged(common_pb2.RaggedArray(), [np.zeros((2, 2))], "float32", "values")


def test_task_and_episode_round_trip():
    task = Task("sudoku-1", "1.\n", None, {"solution": "12\n"}, {"grid": [[1, 0]]})
    assert task_from_proto(task_to_proto(task)) == task
    with_reference = Task("a", "2+2=", "4", {"answer": "4"})
    assert task_from_proto(task_to_proto(with_reference)).reference == "4"
    state = EpisodeState(task=task, observation="obs", turn=2, done=False, data={"grid": [[1, 2]]})
    assert episode_from_proto(episode_to_proto(state)) == state
