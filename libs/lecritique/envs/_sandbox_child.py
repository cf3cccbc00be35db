"""The sandbox's child process: isolate itself, then run one untrusted Python call.

Started by :mod:`lecritique.envs.sandbox` as ``python -I _sandbox_child.py`` in a fresh session
with a clean environment and a private temporary directory as working directory. It reads one
JSON job from stdin and writes one JSON result to ``<workdir>/.result.json``. Only the standard
library is used, and nothing from ``lecritique`` is imported, so the file can run on its own.

Layers, in order (each one that succeeds is reported in the result's ``layers``):

1. ``unshare`` new network, mount, PID, IPC and UTS namespaces (plus a user namespace when not
   root): the network namespace has no interfaces but a downed loopback, so no socket reaches
   anything; the PID namespace makes the untrusted process PID 1 of its own namespace, so every
   process it forks dies with it.
2. In the mount namespace every mount is remounted read-only except a bind mount of the work
   directory; a probe then checks that the usual writable places (/, /tmp, /var/tmp, /dev/shm,
   the work directory's parent, $HOME of root) really refuse writes.
3. Fork: the untrusted code runs in the child (PID 1 of the new PID namespace), which dies if
   this process dies (``PR_SET_PDEATHSIG``).
4. Resource limits: CPU seconds, address space, file size, open files, processes, no core dumps.
5. As root, drop to an unprivileged uid/gid (nobody) with no supplementary groups and
   ``no_new_privs``: ``RLIMIT_NPROC`` only binds non-root users, and only non-root cannot undo
   the namespaces and read-only mounts.
6. A Python audit hook (cannot be removed once installed) refusing sockets, process creation,
   ctypes, and opening files for writing outside the work directory. This is the weakest layer
   (native extensions can bypass it); it is what remains where namespaces are unavailable.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import traceback
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
NOBODY = 65534
_OPTION_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}

libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def enter_namespaces(layers: list[str], notes: list[str]) -> bool:
    """Unshare network/mount/PID namespaces; True when a new PID namespace awaits a fork."""
    base = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    uid, gid = os.geteuid(), os.getegid()
    attempts = [base] if uid == 0 else []
    attempts.append(base | CLONE_NEWUSER)
    for flags in attempts:
        if libc.unshare(flags) != 0:
            notes.append(f"unshare({flags:#x}) failed: {os.strerror(ctypes.get_errno())}")
            continue
        if flags & CLONE_NEWUSER:
            # Map ourselves to root inside the namespace (needed to mount); on the host we stay uid.
            with open("/proc/self/setgroups", "w") as handle:
                handle.write("deny")
            with open("/proc/self/uid_map", "w") as handle:
                handle.write(f"0 {uid} 1")
            with open("/proc/self/gid_map", "w") as handle:
                handle.write(f"0 {gid} 1")
            layers.append("user-namespace")
        layers += ["network-namespace", "pid-namespace"]
        return True
    return False


def _mounts() -> list[tuple[str, int]]:
    """(mount point, preserved flags) from /proc/self/mountinfo, parents first."""
    mounts = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            flags = 0
            for option in fields[5].split(","):
                flags |= _OPTION_FLAGS.get(option, 0)
            mounts.append((point, flags))
    return mounts


def _blocked_ancestors() -> dict[str, list[str]]:
    """Directories others may not traverse -> the interpreter's directories below them."""
    needed = {
        os.path.realpath(path) for path in (sys.prefix, sys.base_prefix, *sys.path) if os.path.isdir(path)
    }
    blocked: dict[str, list[str]] = {}
    for path in sorted(needed):
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            if not os.stat(ancestor).st_mode & 0o001:
                blocked.setdefault(ancestor, []).append(path)
                break
    return blocked


def expose_interpreter(notes: list[str]) -> None:
    """Make the interpreter and its libraries reachable for the unprivileged uid.

    Python often lives under a directory only root may traverse (e.g. pyenv in /root, mode 0700).
    Such a directory is covered, in this mount namespace only, by an empty world-traversable
    tmpfs into which just the interpreter's directories are bind-mounted, which also hides the
    rest of the directory (e.g. root's credentials) from the code.
    """
    for ancestor, paths in _blocked_ancestors().items():
        keep = sorted({p for p in paths if not any(p != q and p.startswith(q + "/") for q in paths)})
        handles = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in keep]
        _check(
            libc.mount(b"tmpfs", ancestor.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=755,size=64k"),
            f"cover {ancestor}",
        )
        for path, handle in zip(keep, handles, strict=True):
            os.makedirs(path, mode=0o755, exist_ok=True)
            _check(
                libc.mount(f"/proc/self/fd/{handle}".encode(), path.encode(), None, MS_BIND | MS_REC, None),
                path,
            )
            os.close(handle)
        notes.append(f"covered {ancestor} (not traversable by the sandbox uid); exposed {', '.join(keep)}")


def make_filesystem_read_only(workdir: str, layers: list[str], notes: list[str]) -> None:
    """Remount everything read-only except a bind mount of ``workdir`` (mount namespace only)."""
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    if os.getuid() == 0 and "user-namespace" not in layers:
        expose_interpreter(notes)  # before the read-only remount, which then covers these mounts too
    _check(libc.mount(workdir.encode(), workdir.encode(), None, MS_BIND | MS_REC, None), "bind workdir")
    for point, flags in _mounts():
        if point == workdir:
            continue
        result = libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None)
        if result != 0:
            notes.append(f"remount {point} read-only failed: {os.strerror(ctypes.get_errno())}")
    if _writable_places(workdir):
        notes.append(f"still writable after remount: {', '.join(_writable_places(workdir))}")
    else:
        layers.append("read-only-filesystem")


def _writable_places(workdir: str) -> list[str]:
    places = ["/", "/tmp", "/var/tmp", "/dev/shm", "/root", os.path.dirname(workdir)]
    writable = []
    for place in places:
        probe = os.path.join(place, f".lecritique-sandbox-probe-{os.getpid()}")
        try:
            descriptor = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:
            continue
        os.close(descriptor)
        os.unlink(probe)
        writable.append(place)
    return writable


def set_limits(limits: dict[str, int], layers: list[str]) -> None:
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"], limits["file_size_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    layers.append("rlimits")


def drop_privileges(workdir: str, layers: list[str], notes: list[str]) -> None:
    if os.getuid() != 0 or "user-namespace" in layers:
        notes.append(f"running as host uid {os.getuid()} (no privileges to drop)")
    elif _blocked_ancestors():
        notes.append("staying root: the interpreter is unreachable for nobody without a mount namespace")
    else:
        os.chown(workdir, NOBODY, NOBODY)
        for name in os.listdir(workdir):
            os.chown(os.path.join(workdir, name), NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        layers.append("unprivileged-uid")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        layers.append("no-new-privileges")


def install_audit_hook(workdir: str, layers: list[str]) -> None:
    root = os.path.realpath(workdir) + os.sep
    forbidden_prefixes = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "ctypes.")
    forbidden = {"os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "pty.spawn"}

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in forbidden or event.startswith(forbidden_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int)
                and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)
            )
            if writing and isinstance(path, str | bytes):
                target = os.path.realpath(os.fsdecode(path))
                if not (target + os.sep).startswith(root) and target != "/dev/null":
                    raise PermissionError(f"sandbox: writing {target} outside the work directory")

    sys.addaudithook(hook)
    layers.append("audit-hook")


def run_call(job: dict[str, Any], workdir: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    exec(compile(job["source"], "<sandboxed>", "exec"), namespace)
    function = namespace.get(job["function"])
    if not callable(function):
        raise NameError(f"the code defines no function {job['function']!r}")
    value = function(**job.get("arguments", {}))
    return {"ok": True, "value": value}


def write_result(workdir: str, result: dict[str, Any]) -> None:
    try:
        text = json.dumps(result, allow_nan=True)
    except (TypeError, ValueError) as error:
        text = json.dumps({"ok": False, "error": f"result is not JSON-serialisable: {error}"[:500]})
    with open(os.path.join(workdir, ".result.json"), "w") as handle:
        handle.write(text)


def worker(job: dict[str, Any], workdir: str, layers: list[str], notes: list[str]) -> None:
    """The untrusted side: limits, privilege drop, audit hook, the call, the result file."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    worker_pid = os.getpid()
    # The cwd still points at the directory under the (now read-only) root mount; re-enter it
    # through the writable bind mount.
    os.chdir(workdir)
    try:
        # Open the output files before the file-size limit and the privilege drop.
        output = os.open(os.path.join(workdir, ".output.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        set_limits(job["limits"], layers)
        drop_privileges(workdir, layers, notes)
        if job.get("audit_hook", True):
            install_audit_hook(workdir, layers)
        # Results are written from inside the call's process, so report the layers first.
        write_result(
            workdir, {"ok": False, "error": "the call did not finish", "layers": layers, "notes": notes}
        )
        try:
            result = run_call(job, workdir)
        except MemoryError:
            result = {"ok": False, "error": "MemoryError: memory limit exceeded"}
        except BaseException as error:
            where = traceback.extract_tb(error.__traceback__)[-1:]
            line = f" (line {where[0].lineno})" if where and where[0].filename == "<sandboxed>" else ""
            result = {"ok": False, "error": f"{type(error).__name__}: {error}"[:400] + line}
        result.update(layers=layers, notes=notes)
        if os.getpid() == worker_pid:  # forked copies of the code must not overwrite the result
            write_result(workdir, result)
    finally:
        sys.stdout.flush()
        os._exit(0)


def main() -> None:
    job = json.loads(sys.stdin.read())
    workdir = os.path.realpath(os.getcwd())
    layers: list[str] = []
    notes: list[str] = []
    try:
        if job.get("namespaces", "auto") != "off":
            if enter_namespaces(layers, notes):
                try:
                    make_filesystem_read_only(workdir, layers, notes)
                except OSError as error:
                    notes.append(str(error))
            elif job.get("namespaces") == "require":
                error_text = "namespaces required but unavailable"
                write_result(workdir, {"ok": False, "error": error_text, "notes": notes})
                sys.exit(3)
    except OSError as error:  # e.g. a user namespace whose id maps cannot be written
        write_result(workdir, {"ok": False, "error": f"sandbox set-up failed: {error}", "notes": notes})
        sys.exit(3)
    # The first child is PID 1 of the new PID namespace: a minimal init whose exit kills every
    # process left in the namespace. The code runs in its child, because the kernel does not
    # deliver default-action signals such as SIGXCPU (the CPU limit) to a namespace's init.
    init = os.fork()
    if init == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        code = os.fork()
        if code == 0:
            worker(job, workdir, layers, notes)
        os._exit(_exit_code(os.waitpid(code, 0)[1]))
    sys.exit(_exit_code(os.waitpid(init, 0)[1]))


def _exit_code(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


if __name__ == "__main__":
    main()
