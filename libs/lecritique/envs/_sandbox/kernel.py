"""ctypes bindings to the few Linux calls the sandbox's child needs (glibc wrappers, errno checked)."""

from __future__ import annotations

import contextlib
import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_THREAD = 0x00010000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_GET_SECCOMP = 21
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAPABILITY = 63
"""Upper bound of capability numbers; PR_CAPBSET_DROP answers EINVAL past the kernel's last one."""

# statvfs flags -> the mount flags a read-only remount must keep (a user namespace cannot clear
# the flags of mounts it inherited: they are locked).
_KEPT_MOUNT_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}

libc = ctypes.CDLL(None, use_errno=True)


class _CapabilityHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapabilityData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _check(result: int, what: str) -> int:
    if result == -1:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")
    return result


def _path(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def unshare(flags: int) -> None:
    _check(libc.unshare(flags), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    result = libc.mount(_path(source), _path(target), _path(fstype), ctypes.c_ulong(flags), _path(data))
    _check(result, f"mount {source or fstype or ''} on {target}")


def remount_read_only(target: str, extra: int = 0) -> None:
    """Make the bind mount at ``target`` read-only and nosuid, keeping the flags it must keep."""
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | extra
    current = os.statvfs(target).f_flag
    for statvfs_flag, mount_flag in _KEPT_MOUNT_FLAGS.items():
        if current & statvfs_flag:
            flags |= mount_flag
    mount(None, target, None, flags)


def umount(target: str, flags: int = 0) -> None:
    _check(libc.umount2(_path(target), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(libc.pivot_root(_path(new_root), _path(put_old)), f"pivot_root {new_root}")


def prctl(option: int, argument: int = 0, third: int = 0) -> int:
    no = ctypes.c_ulong(0)
    return _check(
        libc.prctl(option, ctypes.c_ulong(argument), ctypes.c_ulong(third), no, no), f"prctl({option})"
    )


def capabilities() -> tuple[int, int, int]:
    """(effective, permitted, inheritable) capability sets of this thread, as 64-bit masks."""
    header = _CapabilityHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapabilityData * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    return (
        data[0].effective | data[1].effective << 32,
        data[0].permitted | data[1].permitted << 32,
        data[0].inheritable | data[1].inheritable << 32,
    )


def drop_bounding_and_ambient() -> None:
    """Empty the bounding and ambient capability sets (nothing to do without CAP_SETPCAP)."""
    for capability in range(_LAST_CAPABILITY + 1):
        try:
            prctl(PR_CAPBSET_DROP, capability)
        except OSError:  # EINVAL past the last capability, EPERM without CAP_SETPCAP
            break
    with contextlib.suppress(OSError):
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable capability sets."""
    header = _CapabilityHeader(_CAPABILITY_VERSION_3, 0)
    _check(libc.capset(ctypes.byref(header), (_CapabilityData * 2)()), "capset")
