"""Packed rows: several trajectories end to end in one line of a micro-batch, attention kept inside each row.

A padded micro-batch is ``[rows, longest row]``: every row is padded to the longest, and the
model computes on the padding like on any token. A packed micro-batch is ``[lines, width]``:
rows sit end to end in a line, each row's position ids restart at 0, and attention never
crosses from one row into another, so every row's logits, log-probabilities and values are those
it has alone (the same function of the same inputs, computed in another order: float32 results
agree to rounding, ``tests/integration/training/test_packing.py``). Per-row results are read back from the
row's (line, offset), never from a neighbour's columns.

How attention stays inside a row (:func:`packed_attention`, chosen from the model's
``attn_implementation`` and logged once by each trainer):

- ``mask`` (``sdpa``, the HF default, and ``eager``): a ``[lines, 1, width, width]`` block-diagonal
  causal mask built from each token's row number, passed as the model's 4-D ``attention_mask``,
  which HF hands to SDPA's ``attn_mask`` unchanged (``eager``: the same mask as an additive float
  mask). Dense kernels pay ``width^2`` per line whatever its rows, so a line is as wide as the
  longest row of its micro-batch, and a new line is opened only for a row at least half that
  width; shorter rows fill the gaps of open lines or wait for a narrower micro-batch. A line then
  costs what its opening row would cost padded at that width, the rows in its gaps (padding
  otherwise) cost nothing more, and every line is at least half full.
- ``varlen`` (``flash_attention_2``/``_3`` on CUDA): no mask; HF reads the row boundaries from the
  position ids (a 0 starts a row), builds ``cu_seqlens`` and runs flash attention's varlen
  kernel, whose cost is the sum of the rows' own squares. One line per micro-batch, filled up to
  the token budget with no padding at all (the kernel wants a batch of one).

Rows are placed longest first (first-fit decreasing). A row longer than the budget cannot be
packed whole and is refused (:class:`RowTooLong`, naming the row and the budget), before any
forward pass, on every rank alike.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

logger = logging.getLogger(__name__)

PackedAttention = Literal["mask", "additive", "varlen"]
"""How a packed line keeps attention inside each row: a boolean 4-D mask (SDPA), the same as an
additive float mask (eager attention), or position ids alone (flash attention's varlen kernel)."""

OPEN_LINE_FRACTION = 0.5
"""A dense-attention micro-batch opens a new line only for a row at least this fraction of its width."""

PADDING_SEGMENT = -1
"""Row number of the padding at the end of a line (it attends only to itself, and nothing reads it)."""


class RowTooLong(ValueError):
    """A row longer than the token budget of one packed micro-batch."""


@dataclass(frozen=True)
class Layout:
    """Where the rows of one micro-batch sit in its ``[lines, width]`` grid.

    ``rows[i]`` is an index into the caller's sequence; that row starts at column ``offsets[i]``
    of line ``lines[i]``. Padded: one row per line, at offset 0.
    """

    rows: tuple[int, ...]
    """The caller's indices of the rows of this micro-batch, in placement order."""
    lines: tuple[int, ...]
    """Line of each row."""
    offsets: tuple[int, ...]
    """First column of each row in its line."""
    num_lines: int
    """Lines of the micro-batch (its batch dimension)."""
    width: int
    """Columns of every line (its sequence dimension)."""
    packed: bool
    """Rows share lines (position ids restart per row; the attention mask is block-diagonal)."""

    @property
    def cells(self) -> int:
        """Tokens the model computes on, padding included."""
        return self.num_lines * self.width


def padded_layout(rows: Sequence[int], lengths: Mapping[int, int] | Sequence[int]) -> Layout:
    """One row per line, right-padded to the longest (``lengths`` indexed by the caller's row indices)."""
    return Layout(
        rows=tuple(rows),
        lines=tuple(range(len(rows))),
        offsets=(0,) * len(rows),
        num_lines=len(rows),
        width=max(lengths[row] for row in rows),
        packed=False,
    )


def check_budget(lengths: Sequence[int], budget: int, budget_name: str, names: Sequence[str]) -> None:
    """Refuse a row that cannot be packed whole into ``budget`` tokens, naming it and the budget."""
    for index, length in enumerate(lengths):
        if length > budget:
            raise RowTooLong(
                f"{names[index]} has {length} tokens, more than {budget_name} = {budget}: a packed "
                f"micro-batch holds whole rows; raise {budget_name} to at least {length}, or set "
                "packing: false (a padded row longer than the budget gets a micro-batch of its own)"
            )


def pack(
    lengths: Sequence[int],
    budget: int,
    attention: PackedAttention,
    budget_name: str = "micro_batch_tokens",
    names: Sequence[str] | None = None,
) -> list[Layout]:
    """Micro-batches of at most ``budget`` tokens (lines x width) holding every row once.

    ``names[i]`` describes row i in the error for a row longer than the budget (default ``row i``).
    Deterministic: the same lengths give the same layouts on every rank.
    """
    if budget < 1:
        raise ValueError(f"{budget_name} must be >= 1, got {budget}")
    check_budget(lengths, budget, budget_name, names or [f"row {i}" for i in range(len(lengths))])
    pending = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    layouts: list[Layout] = []
    while pending:
        opens_at: float
        if attention == "varlen":
            capacity, max_lines, opens_at = budget, 1, 0
        else:
            capacity = lengths[pending[0]]
            max_lines, opens_at = max(1, budget // capacity), capacity * OPEN_LINE_FRACTION
        fill: list[int] = []
        placed: list[tuple[int, int, int]] = []
        deferred: list[int] = []
        for row in pending:
            length = lengths[row]
            line = next((j for j, used in enumerate(fill) if used + length <= capacity), None)
            if line is None and len(fill) < max_lines and length >= opens_at:
                fill.append(0)
                line = len(fill) - 1
            if line is None:
                deferred.append(row)
                continue
            placed.append((row, line, fill[line]))
            fill[line] += length
        layouts.append(
            Layout(
                rows=tuple(row for row, _, _ in placed),
                lines=tuple(line for _, line, _ in placed),
                offsets=tuple(offset for _, _, offset in placed),
                num_lines=len(fill),
                width=max(fill),
                packed=True,
            )
        )
        pending = deferred
    return layouts


def packed_attention(attn_implementation: str | None) -> PackedAttention | None:
    """How a model with this ``attn_implementation`` keeps packed rows apart; None: it cannot (pad instead)."""
    implementation = attn_implementation or "sdpa"
    if implementation.startswith("flash_attention"):
        return "varlen"
    if implementation == "sdpa":
        return "mask"
    if implementation == "eager":
        return "additive"
    return None


def model_attention(model: torch.nn.Module) -> str | None:
    """The ``attn_implementation`` a HF model runs (``sdpa`` when it does not say)."""
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) if config is not None else None


def describe(attention: PackedAttention | None, packing: bool, implementation: str | None) -> str:
    """The log line that says how a trainer lays out its micro-batches."""
    if not packing:
        return "padded rows (packing off)"
    if attention is None:
        return f"padded rows: attn_implementation {implementation!r} cannot keep packed rows apart"
    how = {
        "mask": "block-diagonal causal mask through SDPA's attn_mask",
        "additive": "block-diagonal causal additive mask (eager attention)",
        "varlen": "flash attention varlen from position ids, one line per micro-batch",
    }[attention]
    return f"packed rows: {how} (attn_implementation {implementation or 'sdpa'})"


def block_causal_mask(segments: torch.Tensor) -> torch.Tensor:
    """bool [lines, 1, width, width]: query i sees key j iff both are in the same row and j <= i."""
    width = segments.shape[-1]
    same_row = segments[:, :, None] == segments[:, None, :]
    causal = torch.ones((width, width), dtype=torch.bool, device=segments.device).tril()
    return (same_row & causal)[:, None, :, :]


def model_inputs(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    segments: torch.Tensor,
    packed: bool,
    attention: PackedAttention | None,
    mask_dtype: torch.dtype = torch.float32,
) -> dict[str, Any]:
    """The keyword arguments of a HF forward over a (packed or padded) micro-batch."""
    if not packed:
        # Right-padded rows: HF's own padding mask and its default positions (0..L-1 per row).
        return {"input_ids": input_ids, "attention_mask": attention_mask}
    if attention is None:
        raise ValueError("a packed micro-batch needs a packed attention (mask, additive or varlen)")
    if attention == "varlen":
        # No KV cache: HF reads packed rows from position ids only when there is none.
        return {"input_ids": input_ids, "position_ids": position_ids, "use_cache": False}
    mask = block_causal_mask(segments)
    if attention == "additive":
        additive = torch.zeros(mask.shape, dtype=mask_dtype, device=mask.device)
        mask = additive.masked_fill(~mask, torch.finfo(mask_dtype).min)
    return {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": mask, "use_cache": False}


def grid(layout: Layout, lengths: Mapping[int, int] | Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 position ids and row numbers ([lines, width]) of ``layout``; padding: positions from 0, row -1."""
    positions = torch.zeros((layout.num_lines, layout.width), dtype=torch.long)
    segments = torch.full((layout.num_lines, layout.width), PADDING_SEGMENT, dtype=torch.long)
    ends = [0] * layout.num_lines
    for number, (row, line, offset) in enumerate(zip(layout.rows, layout.lines, layout.offsets, strict=True)):
        length = lengths[row]
        positions[line, offset : offset + length] = torch.arange(length)
        segments[line, offset : offset + length] = number
        ends[line] = max(ends[line], offset + length)
    for line, end in enumerate(ends):
        positions[line, end:] = torch.arange(layout.width - end)
    return positions, segments


def varlen_available(device: torch.device, compute_dtype: torch.dtype | None) -> bool:
    """Whether flash attention's varlen kernel can run here: CUDA, bf16/fp16 compute, ``flash_attn`` installed."""
    if device.type != "cuda" or compute_dtype not in (torch.bfloat16, torch.float16):
        return False
    return importlib.util.find_spec("flash_attn") is not None


def use_varlen_where_available(
    model: torch.nn.Module, device: torch.device, compute_dtype: torch.dtype | None
) -> bool:
    """Switch an SDPA model to ``flash_attention_2`` where :func:`varlen_available` (before wrapping it).

    Packed lines then cost the sum of their rows' own attention instead of ``width^2``; a model
    that refuses the switch keeps SDPA and the block-diagonal mask (logged). Returns whether it switched.
    """
    if model_attention(model) not in (None, "sdpa") or not varlen_available(device, compute_dtype):
        return False
    try:
        model.set_attn_implementation("flash_attention_2")  # type: ignore[operator]
    except (ValueError, ImportError, AttributeError) as error:
        logger.warning(
            "packing: flash_attention_2 unavailable for %s (%s); keeping SDPA", type(model).__name__, error
        )
        return False
    return True


def remap(layout: Layout, indices: Sequence[int]) -> Layout:
    """``layout`` with each row ``r`` renamed ``indices[r]`` (a rank's shard back to batch indices)."""
    return dataclasses.replace(layout, rows=tuple(indices[row] for row in layout.rows))
