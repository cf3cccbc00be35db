"""How much Redis memory a replay buffer can hold: its capacity times the size of one trajectory row.

A row is one :class:`lecritique.trajectory.Trajectory` in its wire form (``to_bytes``): the prompt
as int32 ids, then per token after it the token id, the policy mask, the logprob, the step id, the
critic's value and the advantage (:data:`lecritique.trajectory.ARRAY_DTYPES`), a JSON header, and
the buffer's own bookkeeping per entry (its id in a sorted set and a hash of uses and versions).
The estimate takes the longest episode the spec allows, so a buffer never holds more than it says.
"""

from __future__ import annotations

import numpy as np

from lecritique.trajectory import ARRAY_DTYPES

PROMPT_BYTES_PER_TOKEN = int(np.dtype(ARRAY_DTYPES["prompt_ids"]).itemsize)
"""The first prompt's ids."""
RESPONSE_BYTES_PER_TOKEN = sum(
    int(np.dtype(dtype).itemsize)
    for name, dtype in ARRAY_DTYPES.items()
    if name not in ("prompt_ids", "critic_context_ids")
)
"""token id, mask, logprob, step id, value and advantage of each token after the first prompt."""
ROW_OVERHEAD_BYTES = 1024
"""The JSON header (ids, reward, versions, metadata), Redis's per-key and per-entry bookkeeping."""


def trajectory_row_bytes(prompt_tokens: int, response_tokens: int, context_tokens: int = 0) -> int:
    """Bytes one stored trajectory takes at most (see the module docstring)."""
    return (
        PROMPT_BYTES_PER_TOKEN * (prompt_tokens + context_tokens)
        + RESPONSE_BYTES_PER_TOKEN * response_tokens
        + ROW_OVERHEAD_BYTES
    )


def replay_bytes(capacity: int, row_bytes: int) -> int:
    """Bytes a full buffer of ``capacity`` rows holds."""
    return capacity * row_bytes
