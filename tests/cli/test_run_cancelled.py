"""A cancelled run says so (issue 41): the orchestrator's log says why it stopped, and
``lecritique run`` reports "cancelled" (exit 130), not "orchestrator exited with code 1"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lecritique.launch.processes import child_environment
from tests.helm_support import ROOT, quick_policy, tiny_spec_data


def _policy_steps(out: Path) -> int:
    path = out / "metrics.jsonl"
    if not path.exists():
        return 0
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return max((row["step"] for row in rows), default=0)


@pytest.mark.slow(seconds=90)
@pytest.mark.timeout(600)
def test_a_cancelled_run_is_reported_as_cancelled_and_its_log_says_why(tmp_path):
    spec = tiny_spec_data("cancelled", steps=200, policy_path=quick_policy())
    spec.pop("critic")
    spec["estimator"] = {"name": "mean"}
    spec["orchestrator"].pop("eval_every")
    path, out = tmp_path / "spec.yaml", tmp_path / "run"
    path.write_text(yaml.safe_dump(spec))
    process = subprocess.Popen(
        [sys.executable, "-m", "lecritique", "run", str(path), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_environment(ROOT, threads=2),
    )
    try:
        deadline = time.monotonic() + 400
        while _policy_steps(out) < 1:
            assert process.poll() is None and time.monotonic() < deadline, "no policy step was made"
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output[-3000:]
    assert "cancelled after step" in output and "the same command resumes the run" in output
    assert "exited with code" not in output
    log = (out / "logs" / "orchestrator.log").read_text()
    assert "received SIGTERM: cancelling the run" in log, log[-3000:]
    assert "orchestrator cancelled by SIGTERM after step" in log
