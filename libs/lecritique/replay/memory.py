"""How much Redis memory a replay buffer can hold: its capacity times the size of one trajectory row.

A row is one trajectory in its wire form (``lecritique.trajectory.Trajectory.to_bytes``): the first
prompt as int32 ids, then per token after it the token id (int32), the policy mask (bool), the
logprob, the critic's value and the advantage (float32 each) and the step id (int32), a JSON header,
and the buffer's own bookkeeping per entry (its id in a sorted set, a hash of uses and versions).
The buffer stores bytes and imports no trajectory (``docs/ARCHITECTURE.md``); that these numbers are
the wire format's is a test (``tests/integration/replay/test_replay_memory.py``). The estimate takes the longest
episode a spec allows, so a full buffer never holds more than it says.
"""

from __future__ import annotations

PROMPT_BYTES_PER_TOKEN = 4
"""The first prompt's ids (and a privileged context's): int32."""
RESPONSE_BYTES_PER_TOKEN = 4 + 1 + 4 + 4 + 4 + 4
"""token id, policy mask, logprob, step id, value and advantage of each token after the first prompt."""
ROW_OVERHEAD_BYTES = 1024
"""The JSON header (ids, reward, versions, metadata), Redis's per-key and per-entry bookkeeping."""


def trajectory_row_bytes(prompt_tokens: int, response_tokens: int, context_tokens: int = 0) -> int:
    """Bytes one stored trajectory takes at most (see the module docstring)."""
    return (
        PROMPT_BYTES_PER_TOKEN * (prompt_tokens + context_tokens)
        + RESPONSE_BYTES_PER_TOKEN * response_tokens
        + ROW_OVERHEAD_BYTES
    )
