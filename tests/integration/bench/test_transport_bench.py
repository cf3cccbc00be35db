"""``bench/transport.py`` on a small batch: the structured call reaches a server process that decodes
it, and the raw call crosses the same channel (no timing is asserted: ratios belong to `make bench`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import child_environment


def test_the_transport_benchmark_measures_both_calls_on_one_server_process(tmp_path: Path) -> None:
    out = tmp_path / "transport.json"
    completed = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "transport.py"),
            "--trajectories",
            "8",
            "--tokens",
            "64",
            "--repeats",
            "2",
            "--json",
            str(out),
        ],
        env=child_environment(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["bytes"] > 8 * 64 * 13  # token ids, logprobs, values, step ids, mask per token
    for key in (
        "structured_mb_s",
        "raw_mb_s",
        "parse_only_mb_s",
        "ratio",
        "parse_only_ratio",
        "encode_ms",
        "parse_ms",
        "decode_ms",
    ):
        assert result[key] > 0, key
