"""The trajectory record that flows rollout -> verifier -> value evaluator -> replay -> trainers.

Token-level arrays are aligned with ``token_ids``: everything after the first prompt, i.e. the
policy's tokens and, in multi-turn episodes, the environment's observation tokens between turns
(``policy_mask`` tells them apart). Serialised compactly: a small JSON header for scalars and
packed raw bytes for arrays (see :mod:`lecritique.arrays`).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from lecritique.arrays import pack_array, unpack_array

_FORMAT_VERSION = 1
LOGPROBS_TEMPERATURE_KEY = "logprobs_temperature"
"""Metadata key: the temperature of the distribution ``logprobs`` are of (the policy trainer
divides its logits by it, so the importance ratio compares the same distributions)."""
ENGINE_LOGPROBS_TEMPERATURE = 1.0
"""Every rollout engine reports raw-model (temperature 1) logprobs, whatever it sampled at
(the HF engine records them before its temperature warper; vLLM's default ``raw_logprobs``)."""


def logprobs_temperature(trajectory: Trajectory) -> float:
    """The temperature recorded with a trajectory's logprobs (raw-model when none was recorded)."""
    return float(trajectory.metadata.get(LOGPROBS_TEMPERATURE_KEY, ENGINE_LOGPROBS_TEMPERATURE))


ARRAY_DTYPES = {
    "prompt_ids": np.int32,
    "token_ids": np.int32,
    "policy_mask": np.bool_,
    "logprobs": np.float32,
    "step_ids": np.int32,
    "values": np.float32,
    "advantages": np.float32,
    "critic_context_ids": np.int32,
}
"""The dtype of every array field (the wire codec checks incoming batches against it)."""
_ARRAY_FIELDS = tuple(ARRAY_DTYPES)


@dataclass
class Trajectory:
    """One sampled episode of the policy for one task, with everything later stages attach."""

    trajectory_id: str
    """Unique id (experiment-scoped)."""
    task_id: str
    """Id of the environment task this episode solved."""
    group_id: int
    """Episodes sampled for the same task in the same batch share a group id."""
    prompt_ids: np.ndarray
    """int32 [P]: the first prompt the policy saw."""
    token_ids: np.ndarray
    """int32 [T]: policy tokens and (multi-turn) environment tokens after the first prompt."""
    policy_mask: np.ndarray
    """bool [T]: True on tokens the policy generated."""
    logprobs: np.ndarray
    """float32 [T]: the rollout engine's logprob of each policy token (0 elsewhere)."""
    step_ids: np.ndarray
    """int32 [T]: turn / step index of each token (0 for single-turn)."""
    reward: float
    """Terminal return in [0, 1]."""
    policy_version: int
    """Policy weight version that generated the episode."""
    values: np.ndarray | None = None
    """float32 [T]: critic value of the state before each token, attached by the value evaluator."""
    value_version: int = -1
    """Critic weight version that produced ``values`` (-1: none)."""
    advantages: np.ndarray | None = None
    """float32 [T]: frozen advantages used for the policy update."""
    critic_context_ids: np.ndarray | None = None
    """int32 [C]: privileged context the critic saw before the trajectory (None: ordinary VF)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Small JSON-serialisable extras (environment diagnostic, critic-context kind, ...)."""

    @classmethod
    def from_checked(cls, **values: Any) -> Trajectory:
        """A trajectory from every field's value, as a decoder has already checked them in bulk:
        each array of its field's dtype, each token-aligned array as long as ``token_ids``, a finite
        reward. It skips ``__post_init__``, whose per-field checks cost the server more than
        decoding the rest of a 128-trajectory batch (``bench/transport.py``)."""
        if values.keys() != _FIELD_NAMES:
            raise TypeError(
                f"from_checked needs every field; missing {sorted(_FIELD_NAMES - values.keys())}, "
                f"unknown {sorted(values.keys() - _FIELD_NAMES)}"
            )
        trajectory = cls.__new__(cls)
        trajectory.__dict__.update(values)
        return trajectory

    def __post_init__(self) -> None:
        for name in _ARRAY_FIELDS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, np.asarray(value, dtype=ARRAY_DTYPES[name]))
        length = self.token_ids.shape[0]
        for name in TOKEN_ALIGNED_FIELDS:
            value = getattr(self, name)
            if value is not None and value.shape != (length,):
                raise ValueError(f"trajectory field {name!r} has shape {value.shape}, expected ({length},)")
        if not np.isfinite(self.reward):
            raise ValueError(f"trajectory field 'reward' is not finite: {self.reward}")

    @property
    def num_policy_tokens(self) -> int:
        return int(self.policy_mask.sum())

    def to_bytes(self) -> bytes:
        """Compact binary form: ``[u32 header length][JSON header][packed arrays...]``."""
        present = [name for name in _ARRAY_FIELDS if getattr(self, name) is not None]
        header = {
            "v": _FORMAT_VERSION,
            "arrays": present,
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name not in _ARRAY_FIELDS},
        }
        header_bytes = json.dumps(header, separators=(",", ":")).encode()
        parts = [struct.pack("<I", len(header_bytes)), header_bytes]
        parts.extend(pack_array(getattr(self, name)) for name in present)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> Trajectory:
        view = memoryview(data)
        (header_len,) = struct.unpack_from("<I", view, 0)
        header = json.loads(bytes(view[4 : 4 + header_len]))
        if header.pop("v") != _FORMAT_VERSION:
            raise ValueError("unsupported trajectory format version")
        offset = 4 + header_len
        arrays: dict[str, Any] = {}
        for name in header.pop("arrays"):
            arrays[name], offset = unpack_array(view, offset)
        return cls(**header, **arrays)


_FIELD_NAMES = frozenset(f.name for f in fields(Trajectory))
TOKEN_ALIGNED_FIELDS = ("policy_mask", "logprobs", "step_ids", "values", "advantages")
"""The array fields that hold one entry per ``token_ids`` entry."""
