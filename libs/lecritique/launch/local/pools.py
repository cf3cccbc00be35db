"""Two node pools on one machine: the policy path on some cores, the value plane on the others.

On a cluster the critic's services run on a node pool of their own, so a critic costs the policy
loop only what it waits for. On one machine every process competes for the same cores, and a
critic's price would include the cores it takes from rollout and the policy trainer. Pinning
each service's process tree to one of two disjoint core sets (CPU affinity, inherited by every
thread and child) emulates the pools, so that arms compared at equal wall time pay for a critic
what they would pay on a cluster. ``make bench-pipeline`` measures the policy loop's pace under
the same split.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

VALUE_PLANE = ("value-trainer", "value-evaluator")
"""Service name prefixes placed on the value cores (with Redis); every other process, the
orchestrator included, runs on the policy cores."""


@dataclass(frozen=True)
class CorePools:
    """Two disjoint, non-empty core sets standing for two node pools."""

    policy: frozenset[int]
    value: frozenset[int]

    def __post_init__(self) -> None:
        if not self.policy or not self.value:
            raise ValueError("core pools: both the policy and the value pool need at least one core")
        if self.policy & self.value:
            raise ValueError(f"core pools: cores {sorted(self.policy & self.value)} are in both pools")

    @classmethod
    def halves(cls) -> CorePools:
        """The first half of this process's cores for the policy path, the second for the value plane."""
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            raise ValueError(f"core pools need at least 2 cores; this process may use {len(cores)}")
        half = len(cores) // 2
        return cls(frozenset(cores[:half]), frozenset(cores[half:]))

    def cores_of(self, process_name: str) -> frozenset[int]:
        """The pool a local process (a service, ``orchestrator``, ``redis``) runs in."""
        return self.value if process_name.startswith((*VALUE_PLANE, "redis")) else self.policy


def pinned_command(command: list[str], cores: frozenset[int]) -> list[str]:
    """``command`` started on ``cores`` (``taskset``, which sets the affinity and execs it, so the
    process and every thread and child it starts inherit the set; the pid stays the command's)."""
    taskset = shutil.which("taskset")
    if taskset is None:
        raise RuntimeError("core pools need taskset (util-linux) on PATH")
    return [taskset, "--cpu-list", ",".join(str(core) for core in sorted(cores)), *command]


def pin_process(pid: int, cores: frozenset[int]) -> None:
    """Move a running process (every thread it has; later ones inherit) onto ``cores``: for the
    embedded Redis, which the launcher starts as a library call rather than a command."""
    tasks = f"/proc/{pid}/task"
    for task in os.listdir(tasks) if os.path.isdir(tasks) else [str(pid)]:
        try:
            os.sched_setaffinity(int(task), cores)
        except ProcessLookupError:
            continue
