"""The states a text critic scores: a trajectory cut at its segment starts, as text.

Text critics (generative, frozen LLM) read text, not the policy's token ids, so trajectories are
decoded with the *policy's* tokenizer here; the critic then encodes its own prompt with its own
tokenizer (a copy of the policy's, or another model's). The value evaluator, the value trainer
and ``critic-eval`` all build states with :func:`trajectory_states`, so a state is rendered the
same way wherever it is scored or trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lecritique.critics.segments import SegmentRule, segment_starts
from lecritique.trajectory import Trajectory


@dataclass(frozen=True)
class CriticState:
    """One state of a trajectory: the moment before its segment ``index`` starts."""

    index: int
    """Segment number (0 = before the first policy token)."""
    token_index: int
    """Trajectory token at which the segment starts (the value is V(h_token_index))."""
    prefix_text: str
    """Decoded trajectory before that token (earlier actions and observations)."""
    segment_text: str
    """Decoded text of the segment that starts here (up to the next state or the end)."""


@dataclass(frozen=True)
class TrajectoryText:
    """A trajectory decoded for a text critic."""

    prompt_text: str
    """The first prompt the policy saw (without special tokens)."""
    context_text: str
    """The critic's privileged context ("" for none)."""
    states: list[CriticState]
    """Its states at segment starts, in order (empty: no policy tokens)."""
    starts: np.ndarray
    """int64 [S]: token index of every state."""


def token_texts(tokenizer: Any, token_ids: Sequence[int] | np.ndarray) -> list[str]:
    """Decoded text of every token on its own (special tokens decode to "")."""
    return [
        str(text) for text in tokenizer.batch_decode([[int(t)] for t in token_ids], skip_special_tokens=True)
    ]


def decode(tokenizer: Any, token_ids: Sequence[int] | np.ndarray) -> str:
    return str(tokenizer.decode([int(t) for t in token_ids], skip_special_tokens=True))


def trajectory_states(
    trajectory: Trajectory,
    tokenizer: Any,
    rule: SegmentRule,
    max_segments: int | None = None,
    max_length: int | None = None,
) -> TrajectoryText:
    """Cut ``trajectory`` at its segment starts and decode everything a text critic reads."""
    texts = token_texts(tokenizer, trajectory.token_ids)
    starts = segment_starts(
        texts, trajectory.policy_mask, trajectory.step_ids, rule, max_segments, max_length
    )
    ends = [*starts[1:].tolist(), len(texts)]
    states = [
        CriticState(
            index=index,
            token_index=int(start),
            # Decoded as spans, not joined per-token texts: multi-byte characters may span tokens.
            prefix_text=decode(tokenizer, trajectory.token_ids[:start]),
            segment_text=decode(tokenizer, trajectory.token_ids[start:end]),
        )
        for index, (start, end) in enumerate(zip(starts.tolist(), ends, strict=True))
    ]
    context_ids = trajectory.critic_context_ids
    return TrajectoryText(
        prompt_text=decode(tokenizer, trajectory.prompt_ids),
        context_text="" if context_ids is None else decode(tokenizer, context_ids),
        states=states,
        starts=starts,
    )
