"""Segment-level MDP (GenAC §5.1): a response is split into contiguous segments, each one action.

The critic scores the state at the start of every segment; all tokens of a segment share that
state's value, so value-based token advantages (``R - V``, GAE with lambda = 1) are constant
within a segment. Rules:

- ``turn``: one segment per policy turn (multi-turn episodes; single-turn: one segment);
- ``line``: a new segment after every policy token containing a newline;
- ``sentence``: a new segment after a policy token ending in ``.``, ``!`` or ``?`` that is
  followed by whitespace, a newline, or the end of the action, and after every newline;
- ``token``: every policy token is a segment (the token-level MDP; ``critic-eval`` uses it to
  measure states inside a response).

Every rule also starts a segment at the first policy token of each turn, and segments only
start on policy tokens (environment observations are inputs, not actions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

SegmentRule = Literal["sentence", "line", "turn", "token"]
SEGMENT_RULES: tuple[str, ...] = ("sentence", "line", "turn", "token")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]

_SENTENCE_END = ".!?"


def _ends_segment(rule: SegmentRule, text: str, next_text: str | None) -> bool:
    if rule == "turn":
        return False
    if rule == "token":
        return True
    if "\n" in text:
        return True
    if rule == "line":
        return False
    stripped = text.rstrip(" \t")
    if not stripped or stripped[-1] not in _SENTENCE_END:
        return False
    # "3.5" must not split: the stop needs whitespace after it (in this token or the next one).
    return stripped != text or next_text is None or next_text == "" or next_text[:1].isspace()


def segment_starts(
    token_texts: Sequence[str],
    policy_mask: npt.ArrayLike,
    step_ids: npt.ArrayLike,
    rule: SegmentRule,
    max_segments: int | None = None,
) -> IntArray:
    """Token indices at which segments start (the states the critic scores), ascending.

    ``token_texts[t]`` is the decoded text of trajectory token t (special tokens as ""),
    ``policy_mask`` marks policy tokens, ``step_ids`` the turn of each token. With more than
    ``max_segments`` segments, starts are kept evenly spaced (the first one always), i.e.
    neighbouring segments merge. A trajectory without policy tokens has no segments.
    """
    if rule not in SEGMENT_RULES:
        raise ValueError(f"unknown segment rule {rule!r}; known: {', '.join(SEGMENT_RULES)}")
    mask = np.asarray(policy_mask, dtype=bool)
    steps = np.asarray(step_ids)
    if not len(token_texts) == mask.shape[0] == steps.shape[0]:
        raise ValueError(
            f"token_texts ({len(token_texts)}), policy_mask ({mask.shape[0]}) and step_ids ({steps.shape[0]}) "
            "must have one entry per token"
        )
    if max_segments is not None and max_segments < 1:
        raise ValueError(f"max_segments must be >= 1, got {max_segments}")
    starts: list[int] = []
    pending = True
    previous_step: int | None = None
    for t in range(mask.shape[0]):
        if not mask[t]:
            pending = True  # an observation ends the turn's last segment
            continue
        new_turn = steps[t] != previous_step
        # A special token (decoded as "", e.g. the closing EOS) never opens a segment of its own.
        if new_turn or (pending and token_texts[t] != ""):
            starts.append(t)
            pending = False
        previous_step = int(steps[t])
        next_text = token_texts[t + 1] if t + 1 < mask.shape[0] and mask[t + 1] else None
        pending = pending or _ends_segment(rule, token_texts[t], next_text)
    result = np.asarray(starts, dtype=np.int64)
    if max_segments is not None and result.size > max_segments:
        keep = np.unique(np.round(np.linspace(0, result.size - 1, max_segments)).astype(np.int64))
        result = result[keep]
    return result


def segment_index(starts: npt.ArrayLike, length: int) -> IntArray:
    """Segment of every token (tokens before the first start belong to segment 0)."""
    starts_array = np.asarray(starts, dtype=np.int64)
    if starts_array.size == 0:
        return np.zeros(length, dtype=np.int64)
    index = np.searchsorted(starts_array, np.arange(length), side="right") - 1
    return np.clip(index, 0, None).astype(np.int64)


def expand_segment_values(starts: npt.ArrayLike, values: npt.ArrayLike, length: int) -> FloatArray:
    """Per-token values (float32 [length]) from one value per segment."""
    values_array = np.asarray(values, dtype=np.float32)
    starts_array = np.asarray(starts, dtype=np.int64)
    if values_array.shape != starts_array.shape:
        raise ValueError(f"{values_array.shape[0]} values for {starts_array.shape[0]} segments")
    if starts_array.size == 0:
        return np.zeros(length, dtype=np.float32)
    out: FloatArray = values_array[segment_index(starts_array, length)]
    return out
