"""A trainer service's ranks survive rank 0 having no work for longer than the group's timeout.

The other ranks wait inside a broadcast while rank 0 waits for a gRPC call or for the replay
stream; a collective that waits past the process group's timeout aborts the whole group. Rank 0
therefore sends IDLE now and then (``follow_batches``); without it the same wait kills the group.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from lecritique.training.distributed import launch_command

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "libs"), str(REPO_ROOT), str(HERE)]),
        "OMP_NUM_THREADS": "1",
    }
    command = launch_command(2, [str(HERE / "idle_rank_script.py"), str(tmp_path), mode])
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120, check=False)


def test_idle_messages_keep_waiting_ranks_alive_past_the_collective_timeout(tmp_path: Path) -> None:
    result = _run(tmp_path, "heartbeat")
    assert result.returncode == 0, result.stderr[-4000:]
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    rank1 = json.loads((tmp_path / "rank1.json").read_text())
    assert rank0["idle_messages"] >= 6  # 4 s of waiting, one IDLE every 0.5 s
    # Both ranks trained the one batch, together (the all-reduce counted both ranks' 3 trajectories).
    assert rank0["trained"] == rank1["trained"] == [["t0", "t1", "t2", "6"]]


def test_without_idle_messages_the_same_wait_aborts_the_group(tmp_path: Path) -> None:
    result = _run(tmp_path, "silent")
    assert result.returncode != 0
    assert (
        "timed out" in (result.stdout + result.stderr).lower()
        or "timeout" in (result.stdout + result.stderr).lower()
    )
    assert not (tmp_path / "rank1.json").exists()
