"""Trajectories -> micro-batch tensors for the policy and the critic, right-padded or packed.

Policy batch. Row i is ``prompt_ids + token_ids`` (length P + T). The next-token tensors
(``target_ids``, ``loss_mask``, ``old_logprobs``, ``advantages``) have one column fewer than
``input_ids``: column p describes the token at input position p + 1, which the logit at position
p predicts. Trajectory token t sits at input position P + t, so its log-probability, old
log-probability and advantage are in column P + t - 1.

Critic batch. Row i is ``critic_context_ids + prompt_ids + token_ids`` (length C + P + T). The
value of the state before trajectory token t, V(h_t), is the head output at position
C + P + t - 1 (:func:`lecritique.models.critic.state_value_positions`); ``value_positions[i, t]``
holds that position, so ``outputs.gather(1, value_positions)`` lines values up with tokens.

Packed micro-batches (:mod:`lecritique.training.packing`): a :class:`~lecritique.training.packing.Layout`
puts each row at an offset of a line, and every position above moves by that offset; the
next-token tensors stay one column narrower than the line (a row's last column predicts the next
row's first token, and is never in ``loss_mask``). Per-row outputs are read at
``(value_lines, value_positions)`` (critic) or unpacked with :func:`row_columns` (policy).
Without a layout every row has a line of its own at offset 0: the right-padded batch.

Every input is validated first (:mod:`lecritique.training.validation`); a bad trajectory raises
``ValueError`` naming it and the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import torch

from lecritique.models.critic import state_value_positions
from lecritique.training.packing import Layout, PackedAttention, grid, model_inputs, padded_layout
from lecritique.training.validation import (
    describe_row,
    validate_critic_trajectories,
    validate_policy_trajectories,
)
from lecritique.trajectory import Trajectory, logprobs_temperature

PAD_TOKEN_ID = 0
"""Id written into padding; any valid id works because padding is outside the attention mask."""


class _Lines:
    """What packed and padded micro-batches share: the model's inputs over ``[lines, width]``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    segments: torch.Tensor
    layout: Layout

    @property
    def num_tokens(self) -> int:
        """Real (unpadded) input tokens."""
        return int(self.attention_mask.sum())

    def to(self, device: torch.device | str) -> Self:
        moved = {
            field.name: getattr(self, field.name).to(device)
            for field in dataclasses.fields(self)  # type: ignore[arg-type]
            if isinstance(getattr(self, field.name), torch.Tensor)
        }
        return dataclasses.replace(self, **moved)  # type: ignore[type-var]

    def model_inputs(
        self, attention: PackedAttention | None, mask_dtype: torch.dtype = torch.float32
    ) -> dict[str, Any]:
        """Keyword arguments of the model's forward (:func:`lecritique.training.packing.model_inputs`)."""
        return model_inputs(
            self.input_ids,
            self.attention_mask,
            self.position_ids,
            self.segments,
            self.layout.packed,
            attention,
            mask_dtype,
        )


@dataclass
class PolicyBatch(_Lines):
    """Policy inputs over ``[lines, width]`` (one row per line when padded); next-token tensors are [lines, width - 1]."""

    input_ids: torch.Tensor
    """int64 [B, L]: prompt + trajectory tokens, right-padded (or rows end to end when packed)."""
    attention_mask: torch.Tensor
    """int64 [B, L]: 1 on real tokens."""
    target_ids: torch.Tensor
    """int64 [B, L - 1]: ``input_ids[:, 1:]``, the token each logit position predicts."""
    loss_mask: torch.Tensor
    """bool [B, L - 1]: True where the predicted token is a policy token."""
    old_logprobs: torch.Tensor
    """float32 [B, L - 1]: rollout log-probability of the predicted token (0 off-policy)."""
    advantages: torch.Tensor
    """float32 [B, L - 1]: advantage of the predicted token (0 off-policy)."""
    temperatures: torch.Tensor
    """float32 [B, L - 1]: the temperature the old logprob of each column is of (its row's, recorded with the trajectory; 1 off rows)."""
    position_ids: torch.Tensor
    """int64 [B, L]: each token's position in its own row (restarting at every row of a line)."""
    segments: torch.Tensor
    """int64 [B, L]: the micro-batch row each token belongs to (-1 on padding); attention stays within one."""
    layout: Layout
    """Where each row sits; ``layout.packed``: rows share lines."""

    @property
    def num_policy_tokens(self) -> int:
        return int(self.loss_mask.sum())


def policy_length(trajectory: Trajectory) -> int:
    """Tokens of a policy row: prompt + trajectory."""
    return int(trajectory.prompt_ids.shape[0]) + int(trajectory.token_ids.shape[0])


def row_columns(layout: Layout, row: int, trajectory: Trajectory) -> tuple[int, slice]:
    """(line, columns) of the next-token tensors that hold ``trajectory``'s tokens (row ``row`` of ``layout``)."""
    number = layout.rows.index(row)
    start = layout.offsets[number] + trajectory.prompt_ids.shape[0] - 1
    return layout.lines[number], slice(start, start + trajectory.token_ids.shape[0])


def collate_policy(
    trajectories: Sequence[Trajectory], vocab_size: int | None = None, layout: Layout | None = None
) -> PolicyBatch:
    """Validate and lay out a policy batch (alignment in the module docstring).

    ``layout``: which rows of ``trajectories`` and where (its ``rows`` index ``trajectories``);
    None: every row, right-padded.
    """
    if layout is None:
        validate_policy_trajectories(trajectories, vocab_size)
        layout = padded_layout(range(len(trajectories)), [policy_length(t) for t in trajectories])
    else:
        validate_policy_trajectories([trajectories[row] for row in layout.rows], vocab_size)
    lengths = {row: policy_length(trajectories[row]) for row in layout.rows}
    lines, width = layout.num_lines, layout.width
    input_ids = np.full((lines, width), PAD_TOKEN_ID, dtype=np.int64)
    attention_mask = np.zeros((lines, width), dtype=np.int64)
    loss_mask = np.zeros((lines, width - 1), dtype=bool)
    old_logprobs = np.zeros((lines, width - 1), dtype=np.float32)
    advantages = np.zeros((lines, width - 1), dtype=np.float32)
    temperatures = np.ones((lines, width - 1), dtype=np.float32)
    for row, line, offset in zip(layout.rows, layout.lines, layout.offsets, strict=True):
        trajectory = trajectories[row]
        prompt_len, num_tokens = trajectory.prompt_ids.shape[0], trajectory.token_ids.shape[0]
        end = offset + prompt_len + num_tokens
        input_ids[line, offset : offset + prompt_len] = trajectory.prompt_ids
        input_ids[line, offset + prompt_len : end] = trajectory.token_ids
        attention_mask[line, offset:end] = 1
        # The row's logits are columns offset .. end - 2 (end - 1 predicts the next row's first token).
        temperatures[line, offset : end - 1] = logprobs_temperature(trajectory)
        # Token t is predicted by the logit at position offset + prompt_len + t - 1.
        columns = slice(offset + prompt_len - 1, offset + prompt_len - 1 + num_tokens)
        policy = trajectory.policy_mask
        loss_mask[line, columns] = policy
        old_logprobs[line, columns] = np.where(policy, trajectory.logprobs, 0.0)
        assert trajectory.advantages is not None  # checked by validate_policy_trajectories
        advantages[line, columns] = np.where(policy, trajectory.advantages, 0.0)
    input_tensor = torch.from_numpy(input_ids)
    position_ids, segments = grid(layout, lengths)
    return PolicyBatch(
        input_ids=input_tensor,
        attention_mask=torch.from_numpy(attention_mask),
        target_ids=input_tensor[:, 1:].clone(),
        loss_mask=torch.from_numpy(loss_mask),
        old_logprobs=torch.from_numpy(old_logprobs),
        advantages=torch.from_numpy(advantages),
        temperatures=torch.from_numpy(temperatures),
        position_ids=position_ids,
        segments=segments,
        layout=layout,
    )


def token_logprobs(
    logits: torch.Tensor, target_ids: torch.Tensor, temperature: float | torch.Tensor = 1.0
) -> torch.Tensor:
    """log pi(target | prefix) for logits [B, L, V] and targets [B, L - 1]: the [B, L - 1] next-token logprobs.

    Computed in float32 at least (bf16 log-softmax is too coarse for importance ratios). The
    temperature (a number, one per row [B], or one per column [B, L - 1]) must be the one the old
    logprobs are of, so that the ratio compares the same distributions: :attr:`PolicyBatch.temperatures`.
    """
    if logits.shape[:2] != (target_ids.shape[0], target_ids.shape[1] + 1):
        raise ValueError(f"logits {tuple(logits.shape)} do not match target_ids {tuple(target_ids.shape)}")
    shifted = logits[:, :-1, :]
    if shifted.dtype not in (torch.float32, torch.float64):
        shifted = shifted.float()
    if isinstance(temperature, torch.Tensor):
        divisor = temperature.to(shifted.device, shifted.dtype)
        shifted = shifted / (divisor[:, :, None] if divisor.ndim == 2 else divisor[:, None, None])
    elif temperature != 1.0:
        shifted = shifted / temperature
    selected = torch.gather(shifted, -1, target_ids.unsqueeze(-1)).squeeze(-1)
    return selected - torch.logsumexp(shifted, dim=-1)


@dataclass
class CriticBatch(_Lines):
    """Critic inputs over ``[lines, width]`` and per-trajectory-token targets over ``[rows, T]`` (see module docstring)."""

    input_ids: torch.Tensor
    """int64 [lines, L]: critic context + prompt + trajectory tokens, right-padded (or rows end to end when packed)."""
    attention_mask: torch.Tensor
    """int64 [lines, L]: 1 on real tokens."""
    value_positions: torch.Tensor
    """int64 [B, T]: column whose head output is V(h_t) for trajectory token t of row b (0 on padding)."""
    token_mask: torch.Tensor
    """bool [B, T]: True on real trajectory tokens."""
    target_mask: torch.Tensor
    """bool [B, T]: True on the tokens the value loss trains (policy tokens)."""
    targets: torch.Tensor
    """float32 [B, T]: regression / classification target of V(h_t) (0 where not trained)."""
    value_lines: torch.Tensor
    """int64 [B, T]: the line that column is in (row b's own line when padded)."""
    position_ids: torch.Tensor
    """int64 [lines, L]: each token's position in its own row."""
    segments: torch.Tensor
    """int64 [lines, L]: the row each token belongs to (-1 on padding)."""
    layout: Layout
    """Where each row sits; ``layout.packed``: rows share lines."""

    @property
    def num_target_tokens(self) -> int:
        return int(self.target_mask.sum())

    def state_outputs(self, outputs: torch.Tensor) -> torch.Tensor:
        """[B, T] of the [lines, L] head outputs: V(h_t)'s output for every row's token t."""
        return outputs[self.value_lines, self.value_positions]


def _row_targets(index: int, trajectory: Trajectory, targets: Any) -> np.ndarray:
    num_tokens = trajectory.token_ids.shape[0]
    if targets is None:
        return np.full(num_tokens, trajectory.reward, dtype=np.float32)
    row = np.asarray(targets[index], dtype=np.float32)
    if row.ndim != 1 or row.shape[0] < num_tokens:
        raise ValueError(
            f"targets for {describe_row(index, trajectory)} have shape {row.shape}, expected at least ({num_tokens},)"
        )
    row = row[:num_tokens]
    if not np.all(np.isfinite(row[trajectory.policy_mask])):
        raise ValueError(
            f"targets for {describe_row(index, trajectory)} have a non-finite value on a policy token"
        )
    return row


def critic_length(trajectory: Trajectory) -> int:
    """Tokens of a critic row: critic context + prompt + trajectory."""
    context = 0 if trajectory.critic_context_ids is None else int(trajectory.critic_context_ids.shape[0])
    return context + int(trajectory.prompt_ids.shape[0]) + int(trajectory.token_ids.shape[0])


def _target_rows(targets: Any, count: int) -> Any:
    if isinstance(targets, torch.Tensor):
        targets = targets.detach().cpu().numpy()
    if targets is not None and len(targets) != count:
        raise ValueError(f"targets has {len(targets)} rows for {count} trajectories")
    return targets


def critic_sequence(trajectory: Trajectory) -> np.ndarray:
    """The critic's row: critic context + prompt + trajectory tokens."""
    context = trajectory.critic_context_ids
    parts = [trajectory.prompt_ids, trajectory.token_ids]
    return np.concatenate(parts if context is None else [context, *parts])


def collate_critic(
    trajectories: Sequence[Trajectory],
    targets: Sequence[np.ndarray] | np.ndarray | torch.Tensor | None = None,
    vocab_size: int | None = None,
    layout: Layout | None = None,
) -> CriticBatch:
    """Validate and lay out a critic batch.

    ``targets``: None for Monte-Carlo returns (the trajectory's reward on every token), or per
    token targets, one row per trajectory: a list of [T_i] arrays or a padded [B, T] array (e.g.
    ``GAEEstimator.value_targets``); only each row's first T_i entries are read. The loss trains
    policy tokens only, whatever the targets hold elsewhere. ``layout``: which rows of
    ``trajectories`` and where (its ``rows`` index ``trajectories`` and ``targets``); None: every
    row, right-padded. The per-token tensors have one row per layout row, in the layout's order.
    """
    targets = _target_rows(targets, len(trajectories))
    if layout is None:
        validate_critic_trajectories(trajectories, vocab_size)
        layout = padded_layout(range(len(trajectories)), [critic_length(t) for t in trajectories])
    else:
        validate_critic_trajectories([trajectories[row] for row in layout.rows], vocab_size)
    lengths = {row: critic_length(trajectories[row]) for row in layout.rows}
    rows = len(layout.rows)
    max_tokens = max(max(trajectories[row].token_ids.shape[0] for row in layout.rows), 1)
    input_ids = np.full((layout.num_lines, layout.width), PAD_TOKEN_ID, dtype=np.int64)
    attention_mask = np.zeros((layout.num_lines, layout.width), dtype=np.int64)
    value_positions = np.zeros((rows, max_tokens), dtype=np.int64)
    value_lines = np.zeros((rows, max_tokens), dtype=np.int64)
    token_mask = np.zeros((rows, max_tokens), dtype=bool)
    target_mask = np.zeros((rows, max_tokens), dtype=bool)
    target_values = np.zeros((rows, max_tokens), dtype=np.float32)
    for number, (row, line, offset) in enumerate(zip(layout.rows, layout.lines, layout.offsets, strict=True)):
        trajectory = trajectories[row]
        sequence = critic_sequence(trajectory)
        input_ids[line, offset : offset + sequence.shape[0]] = sequence
        attention_mask[line, offset : offset + sequence.shape[0]] = 1
        num_tokens = trajectory.token_ids.shape[0]
        value_positions[number, :num_tokens] = offset + state_value_positions(
            sequence.shape[0] - num_tokens, num_tokens
        )
        value_lines[number, :] = line
        token_mask[number, :num_tokens] = True
        target_mask[number, :num_tokens] = trajectory.policy_mask
        target_values[number, :num_tokens] = np.where(
            trajectory.policy_mask, _row_targets(row, trajectory, targets), 0.0
        )
    position_ids, segments = grid(layout, lengths)
    return CriticBatch(
        input_ids=torch.from_numpy(input_ids),
        attention_mask=torch.from_numpy(attention_mask),
        value_positions=torch.from_numpy(value_positions),
        token_mask=torch.from_numpy(token_mask),
        target_mask=torch.from_numpy(target_mask),
        targets=torch.from_numpy(target_values),
        value_lines=torch.from_numpy(value_lines),
        position_ids=position_ids,
        segments=segments,
        layout=layout,
    )


def split_by_token_budget(
    lengths: Sequence[int], token_budget: int, sort_by_length: bool = True
) -> list[list[int]]:
    """Group indices into micro-batches whose padded size (rows x longest row) fits the budget.

    Indices are taken longest first so rows of similar length share a micro-batch (less padding;
    ``sort_by_length=False`` keeps the given order, for comparison); a single row longer than the
    budget still gets a micro-batch of its own. Grouping never changes a step's loss: every
    micro-batch loss is normalised by the whole batch's token count.
    """
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    order = (
        sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
        if sort_by_length
        else list(range(len(lengths)))
    )
    groups: list[list[int]] = []
    current: list[int] = []
    current_width = 0
    for index in order:
        width = max(current_width, lengths[index])
        if current and width * (len(current) + 1) > token_budget:
            groups.append(current)
            current, width = [], lengths[index]
        current.append(index)
        current_width = width
    if current:
        groups.append(current)
    return groups


def padded_cells(lengths: Sequence[int], groups: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(real tokens, padded cells) of ``groups`` of row indices into ``lengths``, each padded to its longest row."""
    real = sum(lengths[i] for group in groups for i in group)
    cells = sum(len(group) * max(lengths[i] for i in group) for group in groups if group)
    return real, cells


def padding_fraction(lengths: Sequence[int], groups: Sequence[Sequence[int]]) -> float:
    """Padding tokens over all tokens of the padded micro-batches ``groups`` (0: no padding)."""
    real, cells = padded_cells(lengths, groups)
    return 1.0 - real / cells if cells else 0.0


def padding_counts(batches: Sequence[PolicyBatch | CriticBatch]) -> torch.Tensor:
    """float64 [real tokens, computed cells] of the micro-batches ``batches`` (summed over ranks for ``padding_fraction``)."""
    real = sum(batch.num_tokens for batch in batches)
    cells = sum(batch.input_ids.numel() for batch in batches)
    return torch.tensor([real, cells], dtype=torch.float64)
