"""The end of one sandboxed call: every process of its session killed, and waited for.

The host starts the launcher in a new session (``start_new_session``), so the session id is the
launcher's pid and init and the worker inherit it (they never call ``setsid``; the seccomp
filter keeps the code from creating processes). ``SIGKILL`` to the group only queues the signal:
the launcher is the host's child and ``wait`` reaps it, but init and the worker are its children
and grandchildren, reparented once it dies, and they finish exiting in their own time (a loaded
machine took seconds). :func:`kill_session` therefore waits for each of them to exit, on a
``pidfd`` per process (readable once the process has exited), so that a call returns only when
nothing it started still runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time


def session_members(session: int) -> dict[int, str]:
    """pid -> state letter of every process of ``session`` (zombies included: state ``Z``)."""
    members = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after the command name (which may itself hold spaces and parentheses):
        # state, ppid, pgrp, session, ...
        fields = stat.rpartition(b")")[2].split()
        if len(fields) > 3 and int(fields[3]) == session:
            members[int(entry)] = fields[0].decode()
    return members


def living_members(session: int) -> list[int]:
    """The processes of ``session`` that have not exited yet (zombies have, and hold nothing)."""
    return [pid for pid, state in session_members(session).items() if state not in ("Z", "X")]


def _open_pidfd(pid: int, session: int) -> int | None:
    """A pidfd of ``pid`` if it is still a member of ``session`` (not a reused pid), else None."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    # Opened first, checked second: if the pid still names a member now, the pidfd is that member.
    if pid in session_members(session):
        return pidfd
    os.close(pidfd)
    return None


def kill_session(session: int, timeout: float) -> list[int]:
    """SIGKILL every process of ``session`` and wait until each has exited, at most ``timeout`` s.

    Returns the pids still running at the deadline ([] normally: SIGKILL cannot be caught, so
    only a process stuck in the kernel outlives it). Members are looked up again after each wait,
    so none that was mid-``fork`` when the signal came is missed.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        living = living_members(session)
        remaining = deadline - time.monotonic()
        if not living or remaining <= 0:
            return living
        pidfds = [fd for fd in (_open_pidfd(pid, session) for pid in living) if fd is not None]
        try:
            _kill_and_wait(pidfds, deadline)
        finally:
            for pidfd in pidfds:
                os.close(pidfd)


def _kill_and_wait(pidfds: list[int], deadline: float) -> None:
    poller = select.poll()
    for pidfd in pidfds:
        # A member may have left the process group (setpgid); the session still holds it.
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        poller.register(pidfd, select.POLLIN)
    pending = set(pidfds)
    while pending and (remaining := deadline - time.monotonic()) > 0:
        for ready, _ in poller.poll(remaining * 1000):
            poller.unregister(ready)
            pending.discard(ready)
