"""Who the untrusted code runs as: resource limits, no root, no capabilities, no new privileges."""

from __future__ import annotations

import os
import resource

from . import kernel, protocol


class Refusal(Exception):
    """A required isolation layer is missing; the message names it."""

    def __init__(self, layer: str, reason: str) -> None:
        super().__init__(f"required isolation layer {layer!r} is missing: {reason}")
        self.layer = layer


def set_limits(limits: dict[str, int]) -> None:
    """CPU seconds (soft, then SIGKILL one second later), address space, file size, files, processes."""
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def limits_hold(limits: dict[str, int]) -> bool:
    expected = {
        resource.RLIMIT_CPU: limits["cpu_seconds"],
        resource.RLIMIT_AS: limits["memory_bytes"],
        resource.RLIMIT_FSIZE: limits["file_size_bytes"],
        resource.RLIMIT_NOFILE: limits["open_files"],
        resource.RLIMIT_NPROC: limits["processes"],
        resource.RLIMIT_CORE: 0,
    }
    return all(resource.getrlimit(which)[0] == value for which, value in expected.items())


def drop_privileges(host_root: bool) -> None:
    """Never root, no capabilities, ``no_new_privs``.

    ``host_root``: this process is root of the host's user namespace, so it switches to nobody
    (uid and gid, no supplementary groups). In a user namespace (a non-root host) the uid inside
    maps to the caller's unprivileged host uid and stays; its capabilities are dropped.
    """
    kernel.drop_bounding_and_ambient()  # first: that needs CAP_SETPCAP
    if host_root:
        os.setgroups([])
        os.setresgid(protocol.NOBODY, protocol.NOBODY, protocol.NOBODY)
        os.setresuid(protocol.NOBODY, protocol.NOBODY, protocol.NOBODY)
    kernel.clear_capabilities()
    kernel.prctl(kernel.PR_SET_NO_NEW_PRIVS, 1)
    library = os.path.dirname(os.__file__)
    if not os.access(library, os.R_OK | os.X_OK):
        raise Refusal(
            "unprivileged-uid",
            f"uid {os.getuid()} cannot read the interpreter's standard library {library} "
            "(without a mount namespace nothing can expose it)",
        )


def _host_id(map_path: str, inner: int) -> int | None:
    """The host id that ``inner`` maps to in this user namespace (None: unmapped)."""
    with open(map_path) as handle:
        for line in handle:
            start, outer, count = (int(field) for field in line.split())
            if start <= inner < start + count:
                return outer + inner - start
    return None


def unprivileged_problem() -> str | None:
    """Why the process might still be privileged on the host, or None."""
    uids, gids = set(os.getresuid()), set(os.getresgid()) | set(os.getgroups())
    host_uids = {_host_id("/proc/self/uid_map", uid) for uid in uids}
    host_gids = {_host_id("/proc/self/gid_map", gid) for gid in gids}
    if 0 in host_uids or 0 in host_gids:
        return f"uids {sorted(uids)} / gids {sorted(gids)} map to host root"
    return None


def capability_problem() -> str | None:
    effective, permitted, inheritable = kernel.capabilities()
    if effective or permitted or inheritable:
        return f"capabilities effective={effective:#x} permitted={permitted:#x} inheritable={inheritable:#x}"
    return None


def no_new_privileges_problem() -> str | None:
    return None if kernel.prctl(kernel.PR_GET_NO_NEW_PRIVS) == 1 else "no_new_privs is not set"
