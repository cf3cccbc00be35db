"""Conversions between numpy / :class:`~lecritique.trajectory.Trajectory` and protobuf messages.

Arrays travel as ``Tensor{dtype, shape, data}`` with raw C-order bytes; an unset Tensor (empty
dtype) stands for ``None``. Batches of trajectories travel column by column
(``TrajectoryBatch``): each array field of every trajectory end to end in one ``RaggedArray``, so a
128-trajectory batch is 8 large bytes fields instead of ~1000 small messages, whose per-field
protobuf work cost several times the gRPC transfer itself (``bench/transport.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from lecritique.arrays import ALLOWED_DTYPES
from lecritique.envs.base import EpisodeState, Task
from lecritique.trajectory import ARRAY_DTYPES, TOKEN_ALIGNED_FIELDS, Trajectory
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
        raise ValueError(
            f"tensor of dtype {tensor.dtype} and shape {shape} needs {expected} bytes, got {len(tensor.data)}"
        )
    return np.frombuffer(tensor.data, dtype=dtype).reshape(shape).copy()


def require_tensor(tensor: common_pb2.Tensor, field: str) -> np.ndarray:
    array = from_tensor(tensor)
    if array is None:
        raise ValueError(f"field {field!r} is required")
    return array


def fill_ragged(
    message: common_pb2.RaggedArray,
    arrays: Sequence[np.ndarray | None],
    dtype: str,
    field: str,
    *,
    data: bool = True,
) -> list[np.ndarray]:
    """Write 1-D ``arrays`` (None allowed) end to end into ``message`` as one bytes field.

    Left unset when every element is None (the decoder reads that as None everywhere). Returns the
    present arrays in order; with ``data=False`` only dtype and lengths are written, for a caller
    that puts the bytes on the wire itself (:mod:`lecritique.rpc.wire`)."""
    if all(array is None for array in arrays):
        return []
    present = [np.ascontiguousarray(array, dtype=dtype) for array in arrays if array is not None]
    for array in present:
        if array.ndim != 1:
            raise ValueError(
                f"field {field!r} holds an array of shape {array.shape}; only 1-D arrays travel in a batch"
            )
    message.dtype = dtype
    message.lengths.extend(-1 if array is None else len(array) for array in arrays)
    if data:
        message.data = b"".join(array.data for array in present)
    return present


def ragged_from_proto(
    message: common_pb2.RaggedArray,
    field: str,
    count: int,
    dtype: str,
    *,
    writable: bool = True,
    data: bytes | memoryview | None = None,
) -> list[np.ndarray | None]:
    """The ``count`` arrays of ``message``: views into one writable copy of its data, or with
    ``writable=False`` read-only views of the bytes read out of the message (one copy fewer).

    ``data`` stands in for ``message.data`` when the bytes were kept outside the message
    (:func:`lecritique.rpc.wire.parse_with_trajectories`); read-only views of it are aligned or copied."""
    if data is None:
        data = message.data  # each read of a bytes field copies it out of the message
    if not message.lengths:
        if data:
            raise ValueError(f"field {field!r} has {len(data)} bytes of data but no lengths")
        return [None] * count
    if len(message.lengths) != count:
        raise ValueError(f"field {field!r} has {len(message.lengths)} lengths for {count} trajectories")
    if message.dtype != dtype:
        raise ValueError(f"field {field!r} has dtype {message.dtype!r}, expected {dtype!r}")
    lengths = np.asarray(message.lengths, dtype=np.int64)
    if (lengths < -1).any():
        raise ValueError(f"field {field!r} has a negative length other than -1 (None): {int(lengths.min())}")
    expected = int(lengths[lengths > 0].sum()) * np.dtype(dtype).itemsize
    if len(data) != expected:
        raise ValueError(f"field {field!r} needs {expected} bytes for its lengths, got {len(data)}")
    flat = np.frombuffer(bytearray(data) if writable else data, dtype=dtype)
    if not flat.flags.aligned:  # a writer that did not align this column: arrays must be aligned
        flat = flat.copy()
        flat.flags.writeable = writable
    ends = np.cumsum(np.maximum(lengths, 0)).tolist()
    return [
        None if length < 0 else flat[end - length : end]
        for length, end in zip(lengths.tolist(), ends, strict=True)
    ]


_TRAJECTORY_ARRAYS = {name: np.dtype(dtype).name for name, dtype in ARRAY_DTYPES.items()}
_REQUIRED_ARRAYS = ("prompt_ids", "token_ids", "policy_mask", "logprobs", "step_ids")


def fill_trajectory_batch(
    message: common_pb2.TrajectoryBatch, trajectories: Sequence[Trajectory], *, data: bool = True
) -> dict[str, list[np.ndarray]]:
    """Encode ``trajectories`` column by column into ``message`` in place (e.g. ``request.trajectories``).

    Returns each array column's present arrays; ``data=False`` leaves their bytes out (see :func:`fill_ragged`)."""
    message.trajectory_ids.extend(t.trajectory_id for t in trajectories)
    message.task_ids.extend(t.task_id for t in trajectories)
    message.group_ids.extend(t.group_id for t in trajectories)
    message.rewards.extend(t.reward for t in trajectories)
    message.policy_versions.extend(t.policy_version for t in trajectories)
    message.value_versions.extend(t.value_version for t in trajectories)
    message.metadata_json.extend(json.dumps(t.metadata, separators=(",", ":")) for t in trajectories)
    return {
        name: fill_ragged(
            getattr(message, name), [getattr(t, name) for t in trajectories], dtype, name, data=data
        )
        for name, dtype in _TRAJECTORY_ARRAYS.items()
    }


def trajectory_batch_from_proto(
    message: common_pb2.TrajectoryBatch,
    *,
    writable: bool = True,
    data: Mapping[str, bytes | memoryview] | None = None,
) -> list[Trajectory]:
    """Decode a batch; a malformed one raises ValueError naming the field (and trajectory).

    ``writable=False`` hands out read-only arrays (see :func:`ragged_from_proto`), for a reader
    that never writes into them: a write raises instead of going unnoticed. ``data`` holds the
    columns' bytes when they were kept outside ``message`` (a column missing there has none)."""
    count = len(message.trajectory_ids)
    scalars = ("task_ids", "group_ids", "rewards", "policy_versions", "value_versions", "metadata_json")
    for name in scalars:
        if len(getattr(message, name)) != count:
            raise ValueError(
                f"field {name!r} has {len(getattr(message, name))} entries for {count} trajectory ids"
            )
    columns = {
        name: ragged_from_proto(
            getattr(message, name),
            name,
            count,
            dtype,
            writable=writable,
            data=None if data is None else data.get(name, b""),
        )
        for name, dtype in _TRAJECTORY_ARRAYS.items()
    }
    for name in _REQUIRED_ARRAYS:
        missing = [message.trajectory_ids[i] for i, array in enumerate(columns[name]) if array is None]
        if missing:
            raise ValueError(f"field {name!r} is required; trajectories without it: {missing[:5]}")
    # Whole repeated fields at once: indexing a protobuf container element by element costs more.
    ids, tasks, groups, rewards = (
        list(message.trajectory_ids),
        list(message.task_ids),
        list(message.group_ids),
        list(message.rewards),
    )
    policy_versions, value_versions, metadata = (
        list(message.policy_versions),
        list(message.value_versions),
        list(message.metadata_json),
    )
    _check_in_bulk(message, ids, rewards)
    return [
        Trajectory.from_checked(
            trajectory_id=ids[i],
            task_id=tasks[i],
            group_id=groups[i],
            reward=rewards[i],
            policy_version=policy_versions[i],
            value_version=value_versions[i],
            metadata=json.loads(metadata[i]) if metadata[i] else {},
            **{name: column[i] for name, column in columns.items()},
        )
        for i in range(count)
    ]


def _check_in_bulk(message: common_pb2.TrajectoryBatch, ids: list[str], rewards: list[float]) -> None:
    """What ``Trajectory.__post_init__`` checks, for the whole batch at once (the columns' dtypes
    were checked by :func:`ragged_from_proto`)."""
    tokens = np.asarray(message.token_ids.lengths, dtype=np.int64)
    for name in TOKEN_ALIGNED_FIELDS:
        lengths = np.asarray(getattr(message, name).lengths, dtype=np.int64)
        if not len(lengths):  # None in every trajectory
            continue
        wrong = np.flatnonzero((lengths != -1) & (lengths != tokens))
        if len(wrong):
            i = int(wrong[0])
            raise ValueError(
                f"trajectory {ids[i]!r}: field {name!r} has shape ({lengths[i]},), expected ({tokens[i]},)"
            )
    not_finite = np.flatnonzero(~np.isfinite(np.asarray(rewards, dtype=np.float64)))
    if len(not_finite):
        i = int(not_finite[0])
        raise ValueError(f"trajectory {ids[i]!r}: field 'reward' is not finite: {rewards[i]}")


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
