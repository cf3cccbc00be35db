"""Two node pools emulated on one machine (``lecritique run --pools``, a study's ``pools: true``).

Real processes: a command started through :func:`pinned_command` runs, with every thread it
starts, on its pool's cores only; a running process moved by :func:`pin_process` stays there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lecritique.config import parse_spec
from lecritique.launch.local.launcher import LocalLauncher
from lecritique.launch.local.pools import CorePools, pin_process, pinned_command

CORES = sorted(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(len(CORES) < 2, reason="two pools need two cores (CI has 2)")

AFFINITY_OF_A_THREAD = (
    "import os, threading\n"
    "seen = []\n"
    "worker = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
    "worker.start(); worker.join()\n"
    "print(sorted(os.sched_getaffinity(0)), seen[0])\n"
)


def test_pools_are_disjoint_and_non_empty() -> None:
    with pytest.raises(ValueError, match=r"cores \[1\] are in both pools"):
        CorePools(frozenset({0, 1}), frozenset({1}))
    with pytest.raises(ValueError, match="at least one core"):
        CorePools(frozenset(), frozenset({1}))


def test_the_value_plane_and_redis_run_on_the_value_cores() -> None:
    pools = CorePools(frozenset({0}), frozenset({1}))
    on_value = ["value-trainer", "value-evaluator-0", "value-evaluator-3", "redis"]
    on_policy = ["rollout-0", "environment", "policy-trainer", "orchestrator"]
    assert {pools.cores_of(name) for name in on_value} == {frozenset({1})}
    assert {pools.cores_of(name) for name in on_policy} == {frozenset({0})}


@needs_two_cores
def test_halves_split_this_processs_cores() -> None:
    pools = CorePools.halves()
    assert pools.policy | pools.value == set(CORES) and not pools.policy & pools.value
    assert max(pools.policy) < min(pools.value)


@needs_two_cores
def test_a_pinned_command_and_its_threads_run_on_its_cores_only() -> None:
    core = CORES[-1]
    command = pinned_command([sys.executable, "-c", AFFINITY_OF_A_THREAD], frozenset({core}))
    printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    assert printed == f"[{core}] [{core}]"


@needs_two_cores
def test_a_running_process_is_moved_whole(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pin_process(sleeper.pid, frozenset({CORES[0]}))
        tasks = os.listdir(f"/proc/{sleeper.pid}/task")
        assert {frozenset(os.sched_getaffinity(int(task))) for task in tasks} == {frozenset({CORES[0]})}
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_launcher_starts_each_service_on_its_pool(tmp_path: Path) -> None:
    spec = parse_spec(
        {
            "name": "pools",
            "environment": {"kind": "sudoku", "size": 4},
            "policy": {"path": str(tmp_path)},
            "critic": {"context": "none"},
        }
    )
    pools = CorePools(frozenset({0}), frozenset({1}))
    launcher = LocalLauncher(spec, tmp_path, core_pools=pools)
    command = ["python", "-m", "lecritique", "serve", "x"]
    assert launcher._pinned("value-evaluator-0", command)[-5:] == command
    assert launcher._pinned("value-evaluator-0", command)[1:3] == ["--cpu-list", "1"]
    assert launcher._pinned("rollout-0", command)[1:3] == ["--cpu-list", "0"]
    assert LocalLauncher(spec, tmp_path)._pinned("rollout-0", command) == command
