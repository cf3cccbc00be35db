"""Segment-level MDP (GenAC §5.1): a response is split into contiguous segments, each one action.

The critic scores the state at the start of every segment; all tokens of a segment share that
state's value, so value-based token advantages (``R - V``, GAE with lambda = 1) are constant
within a segment. Rules:

- ``turn``: one segment per policy turn (multi-turn episodes; single-turn: one segment);
- ``line``: a new segment after every policy token containing a newline;
- ``sentence``: a new segment after a policy token ending in ``.``, ``!`` or ``?``, and after
  every newline. A stop right after a digit may be a decimal point ("3.14"): it ends the
  sentence only when the next token starts with whitespace, and then the segment starts after
  that token;
- ``token``: every policy token is a segment (the token-level MDP; ``critic-eval`` uses it to
  measure states inside a response).

Every rule also starts a segment at the first policy token of each turn, and segments only
start on policy tokens (environment observations are inputs, not actions).

**Prefix only.** Whether token t opens a segment is decided from tokens before t alone, so the
value token t inherits is V of a state in its prefix, chosen without looking at a_t or later
tokens (the admissibility of a baseline, Le Critique: Privileged Value Functions for LLM
Reinforcement Learning, arXiv:2608.16739, eq. 5). Hence no rule reads the next token's text, an
EOS token opens a pending segment like any other token, and ``max_segments`` is enforced
greedily (a start is kept when at least ``ceil(max_length / max_segments)`` policy tokens passed
since the last kept one, and while fewer than ``max_segments`` were kept), never by choosing
among all of a trajectory's starts once its length is known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

SegmentRule = Literal["sentence", "line", "turn", "token"]
SEGMENT_RULES: tuple[str, ...] = ("sentence", "line", "turn", "token")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]

_SENTENCE_END = ".!?"


def _ends_segment(
    rule: SegmentRule, text: str, previous_text: str, after_number_stop: bool
) -> tuple[bool, bool]:
    """Whether the segment ends after a token of this text (tokens up to it only), and whether
    it ends in a stop after a digit, which the next token's leading whitespace confirms."""
    if rule == "turn":
        return False, False
    if rule == "token" or "\n" in text:
        return True, False
    if rule == "line":
        return False, False
    if after_number_stop and text[:1].isspace():
        return True, False  # "4. Yes": the stop after "4" was a sentence end
    stripped = text.rstrip(" \t")
    if not stripped or stripped[-1] not in _SENTENCE_END:
        return False, False
    if stripped != text:
        return True, False  # whitespace after the stop, in this token
    before = stripped[:-1] or previous_text
    if before[-1:].isdigit():
        return False, True  # "3." may go on as "3.14": the next token decides for the token after it
    return True, False


def segment_starts(
    token_texts: Sequence[str],
    policy_mask: npt.ArrayLike,
    step_ids: npt.ArrayLike,
    rule: SegmentRule,
    max_segments: int | None = None,
    max_length: int | None = None,
) -> IntArray:
    """Token indices at which segments start (the states the critic scores), ascending.

    ``token_texts[t]`` is the decoded text of trajectory token t (special tokens as ""),
    ``policy_mask`` marks policy tokens, ``step_ids`` the turn of each token. At most
    ``max_segments`` starts are kept, each decided from the prefix: a start is dropped (its
    segment merges into the previous one) when fewer than ``ceil(max_length / max_segments)``
    policy tokens passed since the last kept start, or when ``max_segments`` are already kept.
    ``max_length`` is the most policy tokens of an episode (the response budget): with it the
    kept starts spread over the whole budget; without it the first ``max_segments`` are kept.
    A trajectory without policy tokens has no segments.
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
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    spacing = 0 if max_segments is None or max_length is None else math.ceil(max_length / max_segments)
    starts: list[int] = []
    pending = True
    number_stop = False
    previous_step: int | None = None
    previous_text = ""
    position = 0  # policy tokens before t
    last_kept = 0
    for t in range(mask.shape[0]):
        if not mask[t]:
            pending, number_stop = True, False  # an observation ends the turn's last segment
            continue
        if steps[t] != previous_step or pending:
            room = max_segments is None or len(starts) < max_segments
            if not starts or (room and position - last_kept >= spacing):
                starts.append(t)
                last_kept = position
        pending, number_stop = _ends_segment(rule, token_texts[t], previous_text, number_stop)
        previous_step = int(steps[t])
        previous_text = token_texts[t]
        position += 1
    return np.asarray(starts, dtype=np.int64)


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
