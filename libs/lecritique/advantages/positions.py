"""Response positions and their buckets (Le Critique, arXiv:2608.16739, §7.3 eq. 18).

The position of a token is its index among the policy tokens of its episode: 0 for the first
generated token, counting every turn's generated tokens and skipping prompt, environment
(observation) and padding tokens. "Response length" is the number of such tokens, so the
maximum response length of an experiment is ``sampling.max_tokens`` x the environment's turn
limit. Positions depend only on the episode's own history (the tokens before t), never on the
batch it lands in: neither its padded length nor the prompt or observation lengths move them.
"""

from __future__ import annotations

import numpy as np

from lecritique.advantages.batch import BoolArray, IntArray


def response_positions(mask: BoolArray) -> IntArray:
    """Index of every token among its row's policy tokens ([B, T]; -1 before the first one)."""
    positions: IntArray = np.cumsum(mask, axis=1, dtype=np.int64) - 1
    return positions


def position_buckets(mask: BoolArray, buckets: int, max_length: int) -> IntArray:
    """m(t) for every token: ``buckets`` uniform bins of response positions over [0, max_length).

    Positions at or past ``max_length`` fall in the last bucket. Entries of non-policy tokens are
    defined (never negative) but meaningless; callers mask them.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be >= 1, got {buckets}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    positions = np.maximum(response_positions(mask), 0)
    bucket: IntArray = np.minimum(positions * buckets // max_length, buckets - 1)
    return bucket
