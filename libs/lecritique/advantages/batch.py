"""The validated input of every advantage estimator.

Arrays may be numpy arrays or torch tensors; they are validated and converted to float64/int64
numpy once, here, so every estimator computes on the same clean representation. Outputs follow
the type of ``rewards`` (torch in, torch out) and are float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from lecritique.trajectory import Trajectory

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _is_torch(x: object) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _to_numpy(x: Any) -> np.ndarray[Any, Any]:
    if _is_torch(x):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


@dataclass(frozen=True, init=False)
class AdvantageBatch:
    """Token-level inputs of one policy batch.

    - ``rewards`` [B]: terminal return of each trajectory.
    - ``group_ids`` [B]: integer group of each trajectory (same task, same batch).
    - ``mask`` [B, T]: 1 on policy-generated tokens, 0 on prompt/padding/environment tokens.
    - ``values`` [B, T] or None: critic value of the state before each token.
    - ``step_ids`` [B, T] or None: step (turn) index of each token, for step-level estimators.

    Invalid input raises ``ValueError`` naming the offending field.
    """

    rewards: FloatArray
    group_ids: IntArray
    mask: BoolArray
    values: FloatArray | None
    step_ids: IntArray | None
    returns_torch: bool

    def __init__(
        self,
        rewards: Any,
        group_ids: Any,
        mask: Any,
        values: Any = None,
        step_ids: Any = None,
    ) -> None:
        rewards_f = _checked_rewards(rewards)
        group_np = _to_numpy(group_ids)
        if group_np.shape != rewards_f.shape:
            raise ValueError(
                f"group_ids must have shape [{rewards_f.shape[0]}] like rewards, got {group_np.shape}"
            )
        if not np.issubdtype(group_np.dtype, np.integer):
            raise ValueError(f"group_ids must be integers, got dtype {group_np.dtype}")
        mask_np = _checked_mask(mask, rewards_f.shape[0])
        values_f = None if values is None else _checked_values(values, mask_np)
        steps_i: IntArray | None = None
        if step_ids is not None:
            steps_np = _to_numpy(step_ids)
            if steps_np.shape != mask_np.shape:
                raise ValueError(
                    f"step_ids must have the shape of mask {mask_np.shape}, got {steps_np.shape}"
                )
            if not np.issubdtype(steps_np.dtype, np.integer):
                raise ValueError(f"step_ids must be integers, got dtype {steps_np.dtype}")
            steps_i = steps_np.astype(np.int64)

        object.__setattr__(self, "rewards", rewards_f)
        object.__setattr__(self, "group_ids", group_np.astype(np.int64))
        object.__setattr__(self, "mask", mask_np)
        object.__setattr__(self, "values", values_f)
        object.__setattr__(self, "step_ids", steps_i)
        object.__setattr__(self, "returns_torch", _is_torch(rewards))

    @classmethod
    def from_trajectories(
        cls, trajectories: Sequence[Trajectory], *, values_needed_by: str | None = None
    ) -> AdvantageBatch:
        """The batch of ``trajectories``, each row right-padded to the longest one.

        Values come with the trajectories that carry them (the value evaluator's); a batch mixes
        none. ``values_needed_by`` names what needs them: a trajectory without values is then an
        error naming it.
        """
        if not trajectories:
            raise ValueError("no trajectories: a batch needs at least one")
        with_values = [t.values is not None for t in trajectories]
        if (values_needed_by is not None or any(with_values)) and not all(with_values):
            row = with_values.index(False)
            needed_by = values_needed_by or "a batch where other trajectories have them"
            raise ValueError(
                f"trajectory {row} ({trajectories[row].trajectory_id!r}) has no values: {needed_by} needs the critic's values"
            )
        length = max(len(t.token_ids) for t in trajectories)
        mask = np.zeros((len(trajectories), length), dtype=bool)
        step_ids = np.zeros((len(trajectories), length), dtype=np.int64)
        values = np.zeros((len(trajectories), length), dtype=np.float64) if all(with_values) else None
        for row, t in enumerate(trajectories):
            n = len(t.token_ids)
            mask[row, :n] = t.policy_mask
            step_ids[row, :n] = t.step_ids
            if values is not None:
                values[row, :n] = t.values
        return cls(
            rewards=np.array([t.reward for t in trajectories]),
            group_ids=np.array([t.group_id for t in trajectories]),
            mask=mask,
            values=values,
            step_ids=step_ids,
        )

    def select(self, rows: slice | IntArray) -> AdvantageBatch:
        """The sub-batch of ``rows``, already validated (no checks, no copies for a slice)."""
        sub = object.__new__(AdvantageBatch)
        for name in ("rewards", "group_ids", "mask", "values", "step_ids"):
            array = getattr(self, name)
            object.__setattr__(sub, name, None if array is None else array[rows])
        object.__setattr__(sub, "returns_torch", self.returns_torch)
        return sub

    def group_chunks(self, max_tokens: int) -> list[slice | IntArray]:
        """Row selections of about ``max_tokens`` tokens each that never split a group.

        Token-level work runs chunk by chunk so its temporaries stay cache-sized: cost then
        grows linearly with the batch instead of degrading once arrays outgrow the caches.
        """
        order = np.argsort(self.group_ids, kind="stable")
        contiguous = bool(np.all(order == np.arange(self.batch_size)))
        sorted_groups = self.group_ids[order]
        starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
        rows_per_chunk = max(1, max_tokens // max(self.num_tokens, 1))
        chunks: list[slice | IntArray] = []
        begin = 0
        for boundary in [*starts[1:].tolist(), self.batch_size]:
            if boundary - begin >= rows_per_chunk or boundary == self.batch_size:
                chunks.append(slice(begin, boundary) if contiguous else order[begin:boundary])
                begin = boundary
        return chunks

    @property
    def batch_size(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_tokens(self) -> int:
        return int(self.mask.shape[1])

    def require_values(self, estimator: str) -> FloatArray:
        if self.values is None:
            raise ValueError(f"values is required by the {estimator!r} estimator but is None")
        return self.values

    def require_step_ids(self, estimator: str) -> IntArray:
        if self.step_ids is None:
            raise ValueError(f"step_ids is required by the {estimator!r} estimator but is None")
        return self.step_ids

    def output(self, token_advantages: np.ndarray[Any, Any]) -> Any:
        """Zero non-policy tokens and convert to the caller's array type (float32)."""
        out = np.zeros(self.mask.shape, dtype=np.float32)
        np.copyto(out, token_advantages, where=self.mask, casting="same_kind")
        return self.wrap(out)

    def wrap(self, out: npt.NDArray[np.float32]) -> Any:
        """``out`` as the caller's array type (torch if ``rewards`` was torch)."""
        if self.returns_torch:
            import torch

            return torch.from_numpy(out)
        return out


def _checked_rewards(rewards: Any) -> FloatArray:
    rewards_np = _to_numpy(rewards)
    if rewards_np.ndim != 1:
        raise ValueError(f"rewards must have shape [B], got {rewards_np.shape}")
    if not np.issubdtype(rewards_np.dtype, np.number) or np.issubdtype(rewards_np.dtype, np.complexfloating):
        raise ValueError(f"rewards must be real numbers, got dtype {rewards_np.dtype}")
    rewards_f: FloatArray = rewards_np.astype(np.float64)
    if not np.all(np.isfinite(rewards_f)):
        bad = int(np.flatnonzero(~np.isfinite(rewards_f))[0])
        raise ValueError(f"rewards contains a non-finite value at index {bad}")
    if rewards_f.shape[0] == 0:
        raise ValueError("rewards is empty: a batch needs at least one trajectory")
    return rewards_f


def _checked_mask(mask: Any, batch_size: int) -> BoolArray:
    mask_np = _to_numpy(mask)
    if mask_np.ndim != 2 or mask_np.shape[0] != batch_size:
        raise ValueError(f"mask must have shape [B={batch_size}, T], got {mask_np.shape}")
    if mask_np.dtype != np.bool_:
        if not np.all((mask_np == 0) | (mask_np == 1)):
            raise ValueError("mask must contain only 0 and 1")
        mask_np = mask_np.astype(np.bool_)
    empty_rows = np.flatnonzero(~mask_np.any(axis=1))
    if empty_rows.size:
        raise ValueError(
            f"mask has {empty_rows.size} all-masked row(s) (first: row {int(empty_rows[0])}): "
            "every trajectory needs at least one policy token"
        )
    checked: BoolArray = mask_np
    return checked


def _checked_values(values: Any, mask: BoolArray) -> FloatArray:
    values_np = _to_numpy(values)
    if values_np.shape != mask.shape:
        raise ValueError(f"values must have the shape of mask {mask.shape}, got {values_np.shape}")
    values_f = values_np.astype(np.float64)
    bad_values = mask & ~np.isfinite(values_f)
    if bad_values.any():
        row, col = (int(i) for i in np.argwhere(bad_values)[0])
        raise ValueError(f"values contains a non-finite value at a policy token (row {row}, token {col})")
    # Padding may hold anything (NaN included); estimators never read it.
    masked: FloatArray = np.where(mask, values_f, 0.0)
    return masked
