import dataclasses

import numpy as np
import pytest

from lecritique.arrays import pack_array, unpack_array
from lecritique.trajectory import Trajectory


def make(**overrides):
    fields = {
        "trajectory_id": "t1",
        "task_id": "sudoku-42",
        "group_id": 3,
        "prompt_ids": np.array([1, 2, 3]),
        "token_ids": np.array([4, 5, 6, 7]),
        "policy_mask": np.array([1, 1, 0, 1]),
        "logprobs": np.array([-0.1, -0.2, 0.0, -0.3]),
        "step_ids": np.array([0, 0, 1, 1]),
        "reward": 1.0,
        "policy_version": 7,
    } | overrides
    return Trajectory(**fields)


def test_round_trip_keeps_every_field_and_dtype():
    original = make(
        values=np.array([0.5, 0.6, 0.7, 0.8]),
        value_version=2,
        critic_context_ids=np.array([9, 9]),
        metadata={"diagnostic": "solved"},
    )
    restored = Trajectory.from_bytes(original.to_bytes())
    assert restored.trajectory_id == "t1" and restored.policy_version == 7 and restored.value_version == 2
    assert restored.metadata == {"diagnostic": "solved"}
    assert restored.advantages is None
    for name in ("prompt_ids", "token_ids", "policy_mask", "logprobs", "values", "critic_context_ids"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(original, name))
        assert getattr(restored, name).dtype == getattr(original, name).dtype
    assert restored.policy_mask.dtype == np.bool_ and restored.num_policy_tokens == 3


def test_serialisation_is_compact_packed_bytes():
    tokens = 4096
    trajectory = make(
        token_ids=np.arange(tokens),
        policy_mask=np.ones(tokens),
        logprobs=np.zeros(tokens),
        step_ids=np.zeros(tokens),
        values=np.zeros(tokens),
    )
    # int32 ids + bool mask + float32 logprobs + int32 steps + float32 values = 17 bytes/token
    assert len(trajectory.to_bytes()) < tokens * 17 + 1024


def test_misaligned_arrays_name_the_field():
    with pytest.raises(ValueError, match="logprobs"):
        make(logprobs=np.zeros(3))
    with pytest.raises(ValueError, match="reward"):
        make(reward=float("nan"))


def test_pack_array_rejects_object_dtype_and_truncation():
    with pytest.raises(ValueError, match="dtype"):
        pack_array(np.array(["a"], dtype=object))
    packed = pack_array(np.arange(10, dtype=np.int32))
    with pytest.raises(ValueError, match="truncated"):
        unpack_array(packed[:-4])
    array, end = unpack_array(packed)
    assert end == len(packed) and array.tolist() == list(range(10))


def test_from_checked_needs_every_field_and_keeps_what_it_is_given():
    trajectory = make(values=np.zeros(4), advantages=np.ones(4), metadata={"k": 1})
    values = {f.name: getattr(trajectory, f.name) for f in dataclasses.fields(Trajectory)}
    rebuilt = Trajectory.from_checked(**values)
    assert rebuilt.to_bytes() == trajectory.to_bytes() and rebuilt.token_ids is trajectory.token_ids
    del values["advantages"]
    with pytest.raises(TypeError, match=r"missing \['advantages'\]"):
        Trajectory.from_checked(**values)
    with pytest.raises(TypeError, match=r"unknown \['extra'\]"):
        Trajectory.from_checked(
            **{f.name: getattr(trajectory, f.name) for f in dataclasses.fields(Trajectory)}, extra=1
        )
