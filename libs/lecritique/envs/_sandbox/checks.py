"""Verify the isolation layers from inside the untrusted process, before the code runs.

Each check looks at the process as the kernel sees it (ids, capability sets, prctl flags,
/proc/self/ns, the mount table, the root directory) rather than trusting that a set-up call
succeeded. A layer that the mode requires and that fails its check stops the call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from . import identity, namespaces, seccomp


class Expectations:
    """What the set-up promised, to be checked against what the kernel reports.

    A plain class, like the rest of the child: ``dataclasses`` would add its imports to the
    start-up of every sandboxed call.
    """

    def __init__(
        self,
        workdir: str,
        limits: dict[str, int],
        host_namespaces: dict[str, int],
        checkout: str,
        disk_bytes: int,
        namespaces: list[str] | None = None,
        top_level: set[str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.limits = limits
        self.host_namespaces = host_namespaces
        """Namespace inode numbers of the launcher before it unshared (those of the host)."""
        self.checkout = checkout
        """A host directory (the sandbox's own source) that must not be visible."""
        self.disk_bytes = disk_bytes
        self.namespaces = namespaces or []
        """The /proc/self/ns names that were unshared."""
        self.top_level = top_level or set()
        """What the private root's / may contain."""


def _namespace_problem(expect: Expectations, name: str) -> str | None:
    try:
        own = os.stat(f"/proc/self/ns/{name}").st_ino
    except OSError as error:
        return f"cannot inspect /proc/self/ns/{name}: {error}"
    if own == expect.host_namespaces.get(name):
        return f"still in the host's {name} namespace"
    if name == "pid" and os.getpid() != 2:
        return f"pid {os.getpid()} is not the first child of the namespace's init"
    return None


def _private_root_problem(expect: Expectations) -> str | None:
    if os.path.exists(expect.checkout):
        return f"the host directory {expect.checkout} is visible"
    extra = set(os.listdir("/")) - expect.top_level
    if extra:
        return f"unexpected entries in /: {sorted(extra)}"
    siblings = os.listdir(os.path.dirname(expect.workdir))
    if siblings != [os.path.basename(expect.workdir)]:
        return f"the work directory's parent shows {len(siblings)} entries"
    return None


def _private_proc_problem() -> str | None:
    pids = sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return None if set(pids) <= {1, 2} else f"/proc shows processes {pids[:8]}..."


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, per-mount options, filesystem type) from /proc/self/mountinfo."""
    rows = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            before, after = line.split(" - ", 1)
            fields = before.split()
            rows.append((fields[4].encode().decode("unicode_escape"), fields[5], after.split()[0]))
    return rows


def _read_only_problem(expect: Expectations) -> str | None:
    writable = [
        point for point, options, _ in _mounts() if point != expect.workdir and "ro" not in options.split(",")
    ]
    return f"writable mounts: {writable}" if writable else None


def _disk_quota_problem(expect: Expectations) -> str | None:
    kinds = [kind for point, _, kind in _mounts() if point == expect.workdir]
    if kinds[-1:] != ["tmpfs"]:
        return "the work directory is not a size-limited tmpfs"
    stats = os.statvfs(expect.workdir)
    size = stats.f_blocks * stats.f_frsize
    return None if 0 < size <= expect.disk_bytes else f"the work directory holds {size} bytes"


def _check(name: str, expect: Expectations) -> str | None:
    """Why layer ``name`` does not hold, or None."""
    by_layer: dict[str, Callable[[], str | None]] = {
        "rlimits": lambda: None if identity.limits_hold(expect.limits) else "resource limits differ",
        "unprivileged-uid": identity.unprivileged_problem,
        "no-capabilities": identity.capability_problem,
        "no-new-privileges": identity.no_new_privileges_problem,
        "seccomp": seccomp.problem,
        "private-root": lambda: _private_root_problem(expect),
        "private-proc": _private_proc_problem,
        "read-only-filesystem": lambda: _read_only_problem(expect),
        "disk-quota": lambda: _disk_quota_problem(expect),
    }
    for ns_name, layer in namespaces.LAYER_OF.items():
        by_layer[layer] = functools.partial(_namespace_problem, expect, ns_name)
    check = by_layer.get(name)
    if check is None:
        return f"no check for layer {name!r}"
    try:
        return check()
    except OSError as error:
        return f"check failed: {error}"


def verify(required: list[str], expect: Expectations) -> None:
    """Raise :class:`identity.Refusal` for the first required layer that does not hold."""
    for layer in required:
        problem = _check(layer, expect)
        if problem is not None:
            raise identity.Refusal(layer, problem)
