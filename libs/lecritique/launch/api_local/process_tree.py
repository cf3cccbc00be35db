"""Processes by pid across sessions: is it still ours, what runs below it, kill all of it.

The API's local launcher starts each run in a session of its own (so it outlives an API restart)
and keeps only the supervisor's pid and start time; these helpers are what a later API process
needs to poll and cancel it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def process_start_ticks(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (tells a reused pid from ours)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19])


def alive(pid: int, start_ticks: int | None) -> bool:
    """Whether ``pid`` runs (not a zombie) and is the process that started at ``start_ticks``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        state = "?"
    if state == "Z":
        return False
    return start_ticks is None or process_start_ticks(pid) == start_ticks


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before children (services run in sessions of their own)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop(0)
        children = [child for child, parent in parents.items() if parent == current and child not in found]
        found.extend(children)
        frontier.extend(children)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL a process, everything below it, and the process groups they lead."""
    for target in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(target) == target:
                os.killpg(target, signal.SIGKILL)
            else:
                os.kill(target, signal.SIGKILL)
