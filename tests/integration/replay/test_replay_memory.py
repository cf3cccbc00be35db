"""The replay's memory estimate counts the trajectory wire format's bytes (issue #46, item 4).

``replay`` stores bytes and imports no trajectory, so its per-token sizes are numbers of its own;
this ties them to :data:`lecritique.trajectory.ARRAY_DTYPES` and checks that a real trajectory of
the longest length fits in the estimate.
"""

from __future__ import annotations

import numpy as np

from lecritique.replay.memory import (
    PROMPT_BYTES_PER_TOKEN,
    RESPONSE_BYTES_PER_TOKEN,
    ROW_OVERHEAD_BYTES,
    trajectory_row_bytes,
)
from lecritique.trajectory import ARRAY_DTYPES, Trajectory


def test_the_sizes_are_the_wire_formats() -> None:
    size = {name: int(np.dtype(dtype).itemsize) for name, dtype in ARRAY_DTYPES.items()}
    assert PROMPT_BYTES_PER_TOKEN == size["prompt_ids"] == size["critic_context_ids"]
    per_token = [name for name in ARRAY_DTYPES if name not in ("prompt_ids", "critic_context_ids")]
    assert sum(size[name] for name in per_token) == RESPONSE_BYTES_PER_TOKEN


def test_a_full_trajectory_fits_in_its_estimate() -> None:
    prompt, response, context = 300, 2048, 128
    trajectory = Trajectory(
        trajectory_id="exp-0123456789-step-000123-task-0042-sample-07",
        task_id="sudoku-4x4-000042",
        group_id=42,
        prompt_ids=np.arange(prompt, dtype=np.int32),
        token_ids=np.arange(response, dtype=np.int32),
        policy_mask=np.ones(response, dtype=np.bool_),
        logprobs=np.zeros(response, dtype=np.float32),
        step_ids=np.zeros(response, dtype=np.int32),
        reward=1.0,
        policy_version=123,
        values=np.zeros(response, dtype=np.float32),
        value_version=120,
        advantages=np.zeros(response, dtype=np.float32),
        critic_context_ids=np.arange(context, dtype=np.int32),
    )
    stored = len(trajectory.to_bytes())
    estimate = trajectory_row_bytes(prompt, response, context)
    assert stored <= estimate < stored + ROW_OVERHEAD_BYTES
