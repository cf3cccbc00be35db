"""Conversions between numpy / :class:`~lecritique.trajectory.Trajectory` and protobuf messages.

Arrays travel as ``Tensor{dtype, shape, data}`` with raw C-order bytes; an unset Tensor (empty
dtype) stands for ``None``.
"""

from __future__ import annotations

import json

import numpy as np

from lecritique.arrays import ALLOWED_DTYPES
from lecritique.envs.base import EpisodeState, Task
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2, environment_pb2

_DTYPE_NAMES = {np.dtype(name): name for name in ALLOWED_DTYPES}


def fill_tensor(message: common_pb2.Tensor, array: np.ndarray | None) -> None:
    """Write ``array`` into an existing Tensor field in place (one copy of the data)."""
    if array is None:
        return
    name = _DTYPE_NAMES.get(array.dtype)
    if name is None:
        raise ValueError(f"array dtype {array.dtype.name!r} cannot cross the wire")
    message.dtype = name
    message.shape.extend(array.shape)
    message.data = np.ascontiguousarray(array).tobytes()


def to_tensor(array: np.ndarray | None) -> common_pb2.Tensor:
    message = common_pb2.Tensor()
    fill_tensor(message, array)
    return message


def from_tensor(tensor: common_pb2.Tensor) -> np.ndarray | None:
    if not tensor.dtype:
        return None
    if tensor.dtype not in ALLOWED_DTYPES:
        raise ValueError(f"tensor has unsupported dtype {tensor.dtype!r}")
    dtype = np.dtype(tensor.dtype)
    shape = tuple(tensor.shape)
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(tensor.data) != expected:
        raise ValueError(f"tensor of dtype {tensor.dtype} and shape {shape} needs {expected} bytes, got {len(tensor.data)}")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(shape).copy()


def require_tensor(tensor: common_pb2.Tensor, field: str) -> np.ndarray:
    array = from_tensor(tensor)
    if array is None:
        raise ValueError(f"field {field!r} is required")
    return array


_TRAJECTORY_ARRAYS = (
    "prompt_ids", "token_ids", "policy_mask", "logprobs", "step_ids", "values", "advantages", "critic_context_ids",
)


def trajectory_to_proto(trajectory: Trajectory, message: common_pb2.Trajectory | None = None) -> common_pb2.Trajectory:
    """Encode into ``message`` in place when given (e.g. ``request.items.add().trajectory``):
    building sub-messages and assigning them would copy every array again."""
    message = common_pb2.Trajectory() if message is None else message
    message.trajectory_id = trajectory.trajectory_id
    message.task_id = trajectory.task_id
    message.group_id = trajectory.group_id
    message.reward = trajectory.reward
    message.policy_version = trajectory.policy_version
    message.value_version = trajectory.value_version
    message.metadata_json = json.dumps(trajectory.metadata, separators=(",", ":"))
    for name in _TRAJECTORY_ARRAYS:
        fill_tensor(getattr(message, name), getattr(trajectory, name))
    return message


def trajectory_from_proto(message: common_pb2.Trajectory) -> Trajectory:
    return Trajectory(
        trajectory_id=message.trajectory_id,
        task_id=message.task_id,
        group_id=message.group_id,
        prompt_ids=require_tensor(message.prompt_ids, "prompt_ids"),
        token_ids=require_tensor(message.token_ids, "token_ids"),
        policy_mask=require_tensor(message.policy_mask, "policy_mask"),
        logprobs=require_tensor(message.logprobs, "logprobs"),
        step_ids=require_tensor(message.step_ids, "step_ids"),
        reward=message.reward,
        policy_version=message.policy_version,
        values=from_tensor(message.values),
        value_version=message.value_version,
        advantages=from_tensor(message.advantages),
        critic_context_ids=from_tensor(message.critic_context_ids),
        metadata=json.loads(message.metadata_json) if message.metadata_json else {},
    )


def task_to_proto(task: Task) -> environment_pb2.Task:
    return environment_pb2.Task(
        task_id=task.task_id,
        prompt=task.prompt,
        reference=task.reference or "",
        has_reference=task.reference is not None,
        privileged=dict(task.privileged),
        metadata_json=json.dumps(task.metadata, separators=(",", ":")),
    )


def task_from_proto(message: environment_pb2.Task) -> Task:
    return Task(
        task_id=message.task_id,
        prompt=message.prompt,
        reference=message.reference if message.has_reference else None,
        privileged=dict(message.privileged),
        metadata=json.loads(message.metadata_json) if message.metadata_json else {},
    )


def episode_to_proto(state: EpisodeState) -> environment_pb2.EpisodeState:
    return environment_pb2.EpisodeState(
        task=task_to_proto(state.task),
        observation=state.observation,
        turn=state.turn,
        done=state.done,
        data_json=json.dumps(state.data, separators=(",", ":")),
    )


def episode_from_proto(message: environment_pb2.EpisodeState) -> EpisodeState:
    return EpisodeState(
        task=task_from_proto(message.task),
        observation=message.observation,
        turn=message.turn,
        done=message.done,
        data=json.loads(message.data_json) if message.data_json else {},
    )
