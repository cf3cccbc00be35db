"""The seccomp filter of the untrusted process, built with libseccomp (through pyseccomp).

A deny-list (the default action allows): untrusted I/O-prediction code needs computation, memory,
threads and files in its work directory, and an allow-list would break native libraries in ways
that are hard to diagnose. Denied with EPERM, so the code gets an ordinary ``PermissionError``:

- process creation: ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD`` (threads stay
  allowed), ``execve``, ``execveat``; ``clone3`` answers ENOSYS (its flags are in memory that
  seccomp cannot read; glibc then falls back to ``clone`` for threads);
- namespaces and mounts: ``unshare``, ``setns``, ``mount``, ``umount2``, ``pivot_root``,
  ``chroot`` and the new mount API (``fsopen``, ``fsmount``, ``open_tree``, ``move_mount``, ...);
- other processes: ``ptrace``, ``process_vm_readv/writev``, ``kcmp``, ``pidfd_*``, ``tkill``;
  ``kill``, ``tgkill``, ``rt_sigqueueinfo`` and ``rt_tgsigqueueinfo`` only at the process itself;
- the network: ``socket``, ``socketpair`` (no address family is needed);
- the kernel's attack surface: ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*``
  (whose operations bypass seccomp), ``keyctl``/``add_key``/``request_key``, modules, kexec,
  ``reboot``, swap, ``syslog``, ``acct``, ``quotactl``, ``iopl``/``ioperm``/``modify_ldt``,
  clocks, host names, file handles, ``fanotify_init``, ``mknod`` (FIFOs, devices), NUMA page moves;
- identity: ``set*id``, ``setgroups``, ``capset``, ``setsid``, ``setpgid``, ``personality``,
  ``seccomp`` (no new filters or notification listeners).

Syscalls newer than libseccomp's table (numbers above the highest it knows) answer ENOSYS, so a
kernel newer than the filter does not open unreviewed doors. Foreign ABIs (i386 ``int 0x80``,
x32) kill the process: libseccomp's bad-architecture action.
"""

from __future__ import annotations

import ctypes
import errno
import sys
from typing import Any

from . import identity, kernel

_SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}
"""The stable ABI names of glibc and libseccomp2, which pyseccomp would look up with ``find_library``."""


def _import_pyseccomp() -> Any:
    """pyseccomp, with a stand-in ``ctypes.util`` that answers ``find_library`` from ``_SONAMES``.

    The real ``ctypes.util`` imports subprocess and shutil and its ``find_library`` runs
    ``ldconfig``: tens of milliseconds added to every sandboxed call. The real module is put
    back afterwards (or left to be imported normally by whoever needs it).
    """
    saved_module, saved_attribute = sys.modules.get("ctypes.util"), getattr(ctypes, "util", None)
    stand_in = type(sys)("ctypes.util")
    stand_in.find_library = _SONAMES.get  # type: ignore[attr-defined]
    sys.modules["ctypes.util"] = ctypes.util = stand_in  # type: ignore[attr-defined]
    try:
        import pyseccomp as module
    finally:
        if saved_module is None:
            sys.modules.pop("ctypes.util", None)
        else:
            sys.modules["ctypes.util"] = saved_module
        if saved_attribute is None:
            del ctypes.util  # type: ignore[attr-defined]
        else:
            ctypes.util = saved_attribute  # type: ignore[attr-defined]
    return module


try:
    pyseccomp = _import_pyseccomp()
    UNAVAILABLE = ""
except (ImportError, OSError, RuntimeError) as error:  # no pyseccomp, or no libseccomp.so.2
    pyseccomp = None
    UNAVAILABLE = f"{type(error).__name__}: {error}"

PROCESS_CREATION = ("fork", "vfork", "execve", "execveat")
NAMESPACES_AND_MOUNTS = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
)  # fmt: skip
OTHER_PROCESSES = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "tkill", "migrate_pages", "move_pages",
)  # fmt: skip
NETWORK = ("socket", "socketpair")
KERNEL = (
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd",
    "lookup_dcookie", "nfsservctl", "uselib", "vhangup", "iopl", "ioperm", "modify_ldt", "sethostname",
    "setdomainname", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "open_by_handle_at",
    "name_to_handle_at", "fanotify_init", "mknod", "mknodat",
)  # fmt: skip
IDENTITY = (
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
    "setgroups", "capset", "setsid", "setpgid", "personality", "seccomp",
)  # fmt: skip
SIGNALS_TO_SELF_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
DENIED = PROCESS_CREATION + NAMESPACES_AND_MOUNTS + OTHER_PROCESSES + NETWORK + KERNEL + IDENTITY
_NEWER_SYSCALLS = 128
"""How many numbers above libseccomp's highest known syscall also answer ENOSYS."""
_ANCHOR = "clone3"
"""A syscall every supported kernel has (5.3+); the table is scanned upwards from it."""
_GAP = 32
"""Unknown numbers in a row that end the scan."""


def _number(name: str) -> int | None:
    """The native syscall number, or None where libseccomp does not know the name."""
    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    return None if number == -1 else int(number)


def _highest_known() -> int:
    highest = number = _number(_ANCHOR) or 0
    while number - highest <= _GAP:
        number += 1
        try:
            pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number)
        except ValueError:
            continue
        highest = number
    return highest


def build(own_pid: int) -> Any:
    """The filter for the process ``own_pid`` (the only target its signals may reach)."""
    denied = pyseccomp.ERRNO(errno.EPERM)
    missing = pyseccomp.ERRNO(errno.ENOSYS)
    syscall_filter = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    syscall_filter.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    syscall_filter.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)  # a binary tree instead of a linear list
    for name in DENIED:
        number = _number(name)
        if number is not None:
            syscall_filter.add_rule(denied, number)
    not_a_thread = pyseccomp.Arg(0, pyseccomp.MASKED_EQ, kernel.CLONE_THREAD, 0)
    syscall_filter.add_rule(denied, "clone", not_a_thread)
    clone3 = _number("clone3")
    if clone3 is not None:
        syscall_filter.add_rule(missing, clone3)
    for name in SIGNALS_TO_SELF_ONLY:
        number = _number(name)
        if number is not None:
            syscall_filter.add_rule(denied, number, pyseccomp.Arg(0, pyseccomp.NE, own_pid))
    highest = _highest_known()
    for number in range(highest + 1, highest + 1 + _NEWER_SYSCALLS):
        syscall_filter.add_rule(missing, number)
    return syscall_filter


def load(own_pid: int) -> None:
    """Load the filter into this process (requires no_new_privs as an unprivileged process)."""
    if pyseccomp is None:
        raise identity.Refusal(
            "seccomp", f"libseccomp is unavailable ({UNAVAILABLE}); install libseccomp2 and pyseccomp"
        )
    build(own_pid).load()


def problem() -> str | None:
    """Why no filter is active: the kernel must report filter mode and refuse ``unshare(0)`` (harmless)."""
    if kernel.prctl(kernel.PR_GET_SECCOMP) != 2:
        return "the kernel reports no seccomp filter"
    try:
        kernel.unshare(0)
    except PermissionError:
        return None
    return "unshare(0) was allowed"
