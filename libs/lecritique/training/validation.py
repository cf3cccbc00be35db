"""Validation of trajectories before anything is computed on them (the policy's and the critic's).

A bad trajectory raises ``ValueError`` naming it (index and id) and the field.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lecritique.trajectory import Trajectory


def describe_row(index: int, trajectory: Trajectory) -> str:
    """How errors name a trajectory of a batch: its index and id."""
    return f"trajectory {index} ({trajectory.trajectory_id!r})"


def _check_token_ids(
    index: int, trajectory: Trajectory, name: str, ids: np.ndarray, vocab_size: int | None
) -> None:
    if ids.ndim != 1:
        raise ValueError(
            f"{describe_row(index, trajectory)}: field {name!r} must be 1-D, got shape {ids.shape}"
        )
    if ids.size and ids.min() < 0:
        raise ValueError(
            f"{describe_row(index, trajectory)}: field {name!r} has a negative token id {ids.min()}"
        )
    if vocab_size is not None and ids.size and ids.max() >= vocab_size:
        raise ValueError(
            f"{describe_row(index, trajectory)}: field {name!r} has token id {ids.max()} >= vocab size {vocab_size}"
        )


def _check_token_aligned(index: int, trajectory: Trajectory, names: Sequence[str]) -> None:
    expected = trajectory.token_ids.shape
    for name in names:
        shape = np.shape(getattr(trajectory, name))
        if shape != expected:
            raise ValueError(
                f"{describe_row(index, trajectory)}: field {name!r} has shape {shape}, expected {expected}"
            )


def validate_policy_trajectories(trajectories: Sequence[Trajectory], vocab_size: int | None = None) -> None:
    """Raise ``ValueError`` for anything the policy update cannot use."""
    if len(trajectories) == 0:
        raise ValueError("the batch is empty: a policy update needs at least one trajectory")
    for index, trajectory in enumerate(trajectories):
        if not isinstance(trajectory, Trajectory):
            raise ValueError(f"batch item {index} is a {type(trajectory).__name__}, expected a Trajectory")
        where = describe_row(index, trajectory)
        if trajectory.prompt_ids.shape[0] == 0:
            raise ValueError(
                f"{where}: field 'prompt_ids' is empty; the first token needs a prompt to follow"
            )
        if trajectory.token_ids.shape[0] == 0:
            raise ValueError(f"{where}: field 'token_ids' is empty")
        _check_token_ids(index, trajectory, "prompt_ids", trajectory.prompt_ids, vocab_size)
        _check_token_ids(index, trajectory, "token_ids", trajectory.token_ids, vocab_size)
        if trajectory.advantages is None:
            raise ValueError(f"{where}: field 'advantages' is missing; compute advantages before the update")
        _check_token_aligned(index, trajectory, ("policy_mask", "logprobs", "advantages"))
        mask = trajectory.policy_mask
        for name in ("logprobs", "advantages"):
            values = getattr(trajectory, name)
            if not np.all(np.isfinite(values[mask])):
                raise ValueError(f"{where}: field {name!r} has a non-finite value on a policy token")
        # A little above 0 is rounding (an engine's log-softmax of a near-certain token), not an error.
        if np.any(trajectory.logprobs[mask] > 1e-4):
            raise ValueError(f"{where}: field 'logprobs' has a positive log-probability on a policy token")
    if sum(trajectory.num_policy_tokens for trajectory in trajectories) == 0:
        raise ValueError("the batch has no policy tokens (every policy_mask is False)")


def validate_critic_trajectories(trajectories: Sequence[Trajectory], vocab_size: int | None = None) -> None:
    """Raise ``ValueError`` for anything the critic cannot read."""
    if len(trajectories) == 0:
        raise ValueError("the batch is empty: the critic needs at least one trajectory")
    for index, trajectory in enumerate(trajectories):
        if not isinstance(trajectory, Trajectory):
            raise ValueError(f"batch item {index} is a {type(trajectory).__name__}, expected a Trajectory")
        context = trajectory.critic_context_ids
        if context is not None:
            _check_token_ids(index, trajectory, "critic_context_ids", context, vocab_size)
        _check_token_ids(index, trajectory, "prompt_ids", trajectory.prompt_ids, vocab_size)
        _check_token_ids(index, trajectory, "token_ids", trajectory.token_ids, vocab_size)
        _check_token_aligned(index, trajectory, ("policy_mask",))
        prefix_len = (0 if context is None else context.shape[0]) + trajectory.prompt_ids.shape[0]
        if prefix_len == 0:
            raise ValueError(
                f"{describe_row(index, trajectory)}: fields 'critic_context_ids' and 'prompt_ids' are both empty; "
                "V(h_0) needs a position to be read from"
            )
