"""Helpers shared by the sandbox tests: hostile CodeIO tasks, the host checks after every call."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from lecritique.envs import Task, get_environment
from lecritique.envs.codeio import CodeIOEnvironment
from lecritique.envs.sandbox import CHILD

LIMITS: dict[str, Any] = {"wall_seconds": 5.0, "cpu_seconds": 1, "memory_mb": 512}
"""Small limits keep the containment tests fast."""

SETUPS: dict[str, dict[str, Any]] = {
    "default": {},
    "kernel-layers-only": {"namespaces": "require", "audit_hook": False},
}
"""Every layer this machine offers, and the kernel's layers alone (no Python audit hook)."""

ANSWER = '<answer>{"n": 1}</answer>'
"""The candidate input every hostile task is scored with."""


def task_running(code: str, output: Any = 1) -> Task:
    """An input-prediction task whose reference code is ``code`` (expected output ``output``)."""
    return Task(
        task_id="codeio-hostile",
        prompt="predict an input",
        reference='{"n": 1}',
        privileged={"answer": '{"n": 1}'},
        metadata={"program": -1, "direction": "input", "code": code, "inputs": {"n": 1}, "output": output},
    )


def codeio(setup: str = "default", **sandbox: Any) -> CodeIOEnvironment:
    """A CodeIO environment whose sandbox uses ``setup`` and the small limits."""
    environment = get_environment("codeio", sandbox={**LIMITS, **SETUPS[setup], **sandbox})
    assert isinstance(environment, CodeIOEnvironment)
    return environment


def sandbox_processes() -> list[str]:
    """Processes of this checkout's sandboxes (launcher, init and worker all run its child script).

    Matched by the script's path, so that other checkouts' sandboxes on a shared machine do not
    count; the code itself cannot start other programs (seccomp refuses fork and exec).
    """
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(CHILD) in command:
            found.append(f"{pid} {command[:120]}")
    return found


def no_sandbox_processes_remain(grace_seconds: float = 5.0) -> bool:
    """True once every sandbox process is gone; killed processes need a moment to be reaped."""
    deadline = time.monotonic() + grace_seconds
    while sandbox_processes():
        if time.monotonic() > deadline:
            raise AssertionError(f"stray sandbox processes: {sandbox_processes()}")
        time.sleep(0.05)
    return True


def finishes(work: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``work()``'s value; fails (instead of hanging the suite) if it has not returned in ``seconds``.

    A liveness guard, not a speed assertion: the calls it wraps take well under a second.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"the call did not return within {seconds:g} s (the verifier hangs)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class HostFile:
    """A file on the host that an attack aims at; ``untouched()`` checks content, mode and mtime."""

    def __init__(self, path: os.PathLike[str] | str, content: str, mode: int = 0o600) -> None:
        self.path = os.fspath(path)
        with open(self.path, "w") as handle:
            handle.write(content)
        os.chmod(self.path, mode)
        self.content = content
        self.stat = os.stat(self.path)

    def untouched(self) -> bool:
        now = os.stat(self.path)
        with open(self.path) as handle:
            content = handle.read()
        return (
            content == self.content
            and now.st_mode == self.stat.st_mode
            and now.st_mtime_ns == self.stat.st_mtime_ns
            and now.st_uid == self.stat.st_uid
        )
