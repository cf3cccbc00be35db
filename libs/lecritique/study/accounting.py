"""What a study spent besides its arms' budgets, and how loaded the machine was while each run ran.

Arms compared at equal wall time (``orchestrator.max_seconds``) are only comparable on a machine
that gives every arm the same share of its cores, and a study's cost is more than its budgets
(issue 45): starting-policy builds, pretraining, each run's start-up and teardown, the step that
overshoots the budget and the final held-out evaluation, the ceiling probe. This module measures
both, with no assumption about what else runs:

- **foreign CPU**: the CPU time the whole machine spent (``/proc/stat``, every core, not idle)
  minus the study process's own and its reaped children's (``os.times``: the services it started
  and waited for), over the run's wall time, in cores. About 0 on an otherwise idle machine.
- **load average**: the kernel's 1-minute load, sampled every few seconds; it counts the study's
  own processes too, so it is read beside the cores (a 2-core machine running one arm sits near 2).

Each run's record (:class:`RunTiming`) is written into its folder (``study_timing.json``, one entry
per attempt: a resumed run has several); the study's own sections (builds, pretraining, the probe)
into ``OUT/accounting.json``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TIMING_FILE = "study_timing.json"
"""In a run folder: one :class:`RunTiming` per attempt at the run."""
ACCOUNTING_FILE = "accounting.json"
"""In the study folder: the study's sections outside the runs (:func:`record_section`)."""
LOADED_CORES = 0.2
"""Mean foreign CPU (cores) above which a file's header says its machine was loaded."""


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds spent so far: by the whole machine, and by this process with its reaped children."""

    machine: float
    own: float
    wall: float


def _machine_busy_seconds() -> float:
    """Non-idle CPU seconds of every core since boot (``/proc/stat``: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(value) for value in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    # guest time is already counted in user; steal is time this machine did not get.
    busy = sum(ticks[:8]) - idle
    return busy / os.sysconf("SC_CLK_TCK")


def cpu_snapshot() -> CpuSnapshot:
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return CpuSnapshot(_machine_busy_seconds(), own, time.monotonic())


def foreign_cores(before: CpuSnapshot, after: CpuSnapshot) -> float:
    """Cores other processes kept busy between two snapshots (never below 0: the two clocks tick
    at different granularity)."""
    wall = after.wall - before.wall
    if wall <= 0:
        return 0.0
    return max(0.0, ((after.machine - before.machine) - (after.own - before.own)) / wall)


class LoadSampler:
    """The 1-minute load average every ``every`` seconds, on a daemon thread, until :meth:`stop`."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = []
        self._every = every
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load-sampler", daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stopped.wait(self._every):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


@dataclass
class RunTiming:
    """One attempt at one run: where its wall time went and how loaded the machine was."""

    started_at: float
    """Unix time the attempt started."""
    wall_seconds: float = 0.0
    """From the attempt's start to its services' teardown done."""
    services_seconds: float = 0.0
    """Starting the services (and Redis) before the orchestrator."""
    teardown_seconds: float = 0.0
    """Stopping them once the orchestrator ended."""
    foreign_cores: float = 0.0
    """Mean cores busy with work other than the study's own (:func:`foreign_cores`)."""
    load_1min: list[float] = field(default_factory=list)
    """The 1-minute load average, sampled every few seconds."""
    cores: int = 0
    """Cores this process could run on."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextmanager
def timed_run(folder: Path) -> Iterator[RunTiming]:
    """Measure one attempt at a run; the caller fills ``services_seconds`` and ``teardown_seconds``.
    The record is appended to ``folder/study_timing.json`` even when the run fails."""
    timing = RunTiming(started_at=time.time(), cores=len(os.sched_getaffinity(0)))
    before = cpu_snapshot()
    sampler = LoadSampler()
    sampler.__enter__()
    try:
        yield timing
    finally:
        sampler.stop()
        after = cpu_snapshot()
        timing.wall_seconds = after.wall - before.wall
        timing.foreign_cores = foreign_cores(before, after)
        timing.load_1min = [round(value, 2) for value in sampler.samples]
        folder.mkdir(parents=True, exist_ok=True)
        attempts = run_timings(folder)
        attempts.append(timing.to_dict())
        (folder / TIMING_FILE).write_text(json.dumps(attempts, indent=1))


def run_timings(folder: Path) -> list[dict[str, Any]]:
    """Every attempt recorded in a run folder (none: an empty list)."""
    try:
        loaded = json.loads((folder / TIMING_FILE).read_text())
    except (OSError, ValueError):
        return []
    return list(loaded) if isinstance(loaded, list) else []


def record_section(out: Path, kind: str, what: str, seconds: float, **facts: Any) -> None:
    """Append one of the study's own sections (a build, a pretrain stage, the ceiling probe) to
    ``OUT/accounting.json``."""
    path = out / ACCOUNTING_FILE
    try:
        sections = json.loads(path.read_text())
    except (OSError, ValueError):
        sections = []
    sections.append({"kind": kind, "what": what, "seconds": round(seconds, 1), "at": time.time(), **facts})
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sections, indent=1))


def study_sections(out: Path) -> list[dict[str, Any]]:
    """The study's own sections recorded so far."""
    try:
        loaded = json.loads((out / ACCOUNTING_FILE).read_text())
    except (OSError, ValueError):
        return []
    return list(loaded) if isinstance(loaded, list) else []


def run_account(
    attempts: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], budget: float | None
) -> dict[str, Any]:
    """One run's time, summed over its attempts: wall, start-up, teardown, the orchestrator's own
    clock, the part past the budget, seconds to its first policy step, and the machine's load."""
    wall = sum(float(a.get("wall_seconds", 0.0)) for a in attempts)
    services = sum(float(a.get("services_seconds", 0.0)) for a in attempts)
    teardown = sum(float(a.get("teardown_seconds", 0.0)) for a in attempts)
    clocked = [row for row in rows if isinstance(row.get("seconds"), int | float)]
    orchestrator = float(clocked[-1]["seconds"]) if clocked else 0.0
    first = next((float(row["seconds"]) for row in clocked if row.get("step", 0) >= 1), float("nan"))
    loads = [float(x) for a in attempts for x in a.get("load_1min", [])]
    weighted = sum(float(a.get("foreign_cores", 0.0)) * float(a.get("wall_seconds", 0.0)) for a in attempts)
    return {
        "wall_seconds": wall,
        "services_seconds": services,
        "teardown_seconds": teardown,
        "orchestrator_seconds": orchestrator,
        "past_budget_seconds": max(0.0, orchestrator - budget) if budget is not None else 0.0,
        "first_step_seconds": first,
        "foreign_cores": weighted / wall if wall > 0 else float("nan"),
        "load_1min_mean": sum(loads) / len(loads) if loads else float("nan"),
        "load_1min_max": max(loads) if loads else float("nan"),
        "attempts": len(attempts),
        "budget_seconds": budget,
        "cores": max((int(a.get("cores", 0)) for a in attempts), default=0),
    }
