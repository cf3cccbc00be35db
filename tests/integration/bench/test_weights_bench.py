"""``bench/weights.py`` on the tiny size: every transport it measures still runs (its imports once
rotted unnoticed and failed `make bench-weights`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import child_environment


def test_the_weights_benchmark_measures_publish_load_and_broadcast_on_the_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "weights.json"
    completed = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "weights.py"),
            "--sizes",
            "tiny",
            "--skip-vllm",
            "--json",
            str(out),
        ],
        env=child_environment(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert completed.returncode == 0, completed.stderr[-3000:]
    (row,) = json.loads(out.read_text())["measured"]
    for key in ("publish_s", "load_hf_s", "load_evaluator_s", "broadcast_s"):
        assert row[key] > 0, key
