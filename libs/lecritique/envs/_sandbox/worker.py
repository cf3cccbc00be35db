"""The untrusted side: the audit hook, the call itself, and the frames to the host."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

FORBIDDEN_EVENT_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "ctypes.")
FORBIDDEN_EVENTS = {"os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "pty.spawn"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def send(descriptor: int, frame: dict[str, Any]) -> None:
    """Write one newline-terminated JSON frame completely (a pipe may take it in parts)."""
    data = (json.dumps(frame, allow_nan=True) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def install_audit_hook(workdir: str) -> None:
    """Refuse sockets, process creation, ctypes and writes outside ``workdir`` at the Python level.

    The second layer behind the kernel's (seccomp, namespaces, uid): native code bypasses it, but
    it turns most attempts into a clear ``PermissionError`` early.
    """
    root = os.path.realpath(workdir) + os.sep

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in FORBIDDEN_EVENTS or event.startswith(FORBIDDEN_EVENT_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and isinstance(path, str | bytes):
                target = os.path.realpath(os.fsdecode(path))
                if not (target + os.sep).startswith(root) and target != "/dev/null":
                    raise PermissionError(f"sandbox: writing {target} outside the work directory")

    sys.addaudithook(hook)


def _describe(error: BaseException) -> str:
    if isinstance(error, MemoryError):
        return "MemoryError: memory limit exceeded"
    where = traceback.extract_tb(error.__traceback__)[-1:]
    line = f" (line {where[0].lineno})" if where and where[0].filename == "<sandboxed>" else ""
    return f"{type(error).__name__}: {error}"[:400] + line


def run_call(job: dict[str, Any]) -> dict[str, Any]:
    """Execute the source, call the function; the outcome as a result frame's fields."""
    try:
        namespace: dict[str, Any] = {"__name__": "__sandbox__", "__builtins__": __builtins__}
        exec(compile(job["source"], "<sandboxed>", "exec"), namespace)
        function = namespace.get(job["function"])
        if not callable(function):
            raise NameError(f"the code defines no function {job['function']!r}")
        value = function(**job.get("arguments", {}))
    except BaseException as error:  # SystemExit and KeyboardInterrupt included: the call failed
        return {"ok": False, "error": _describe(error)}
    try:
        json.dumps(value, allow_nan=True)
    except Exception as error:
        return {"ok": False, "error": f"result is not JSON-serialisable: {error}"[:400]}
    return {"ok": True, "value": value}
