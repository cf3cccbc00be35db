"""Enter new namespaces (network, mount, PID, IPC, UTS; plus a user namespace when not root)."""

from __future__ import annotations

import os

from . import kernel, protocol

LAYER_OF = {
    "mnt": "mount-namespace",
    "pid": "pid-namespace",
    "net": "network-namespace",
    "ipc": "ipc-namespace",
    "uts": "uts-namespace",
    "user": protocol.USER_NAMESPACE,
}
"""/proc/self/ns entry -> the layer it provides."""
_FLAG_OF = {
    "mnt": kernel.CLONE_NEWNS,
    "pid": kernel.CLONE_NEWPID,
    "net": kernel.CLONE_NEWNET,
    "ipc": kernel.CLONE_NEWIPC,
    "uts": kernel.CLONE_NEWUTS,
    "user": kernel.CLONE_NEWUSER,
}


def current_ids() -> dict[str, int]:
    """Inode numbers of this process's namespaces (compared after the set-up: they must differ)."""
    ids = {}
    for name in LAYER_OF:
        try:
            ids[name] = os.stat(f"/proc/self/ns/{name}").st_ino
        except OSError:
            continue
    return ids


def enter(notes: list[str]) -> list[str]:
    """Unshare the namespaces; their names, or [] when the kernel refuses (noted).

    As root no user namespace is needed (the code is dropped to nobody later). Otherwise a user
    namespace maps the caller's uid/gid to root inside, which may mount; on the host the code
    keeps the caller's unprivileged uid. The new PID namespace applies to the next fork.
    """
    names = ["mnt", "pid", "net", "ipc", "uts"]
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        names.append("user")
    flags = 0
    for name in names:
        flags |= _FLAG_OF[name]
    try:
        kernel.unshare(flags)
    except OSError as error:
        notes.append(f"namespaces unavailable: {error}")
        return []
    if uid != 0:
        for path, text in (
            ("/proc/self/setgroups", "deny"),
            ("/proc/self/uid_map", f"0 {uid} 1"),
            ("/proc/self/gid_map", f"0 {gid} 1"),
        ):
            with open(path, "w") as handle:
                handle.write(text)
    return names
