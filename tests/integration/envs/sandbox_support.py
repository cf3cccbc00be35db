"""Helpers shared by the sandbox tests: hostile CodeIO tasks, the host checks after every call."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from lecritique.envs import Task, get_environment
from lecritique.envs.codeio import CodeIOEnvironment
from lecritique.envs.sandbox import CHILD
from lecritique.envs.sandbox_reap import living_members
from tests.unit.envs.liveness import finishes  # noqa: F401  (the sandbox tests' import)

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


_SESSIONS: list[int] = []
"""Sessions (launcher pids) of the sandboxes started by the running test: :func:`record_sessions`."""


def record_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now until the test ends, note the session of every sandbox the test starts.

    Only this test's own sandboxes count: another xdist worker's sandboxes (the same checkout,
    running at the same time) are none of its business.
    """
    _SESSIONS.clear()
    real = subprocess.Popen

    class Recorded(real):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if kwargs.get("start_new_session") and str(CHILD) in map(str, args[0]):
                _SESSIONS.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Recorded)


def no_sandbox_processes_remain() -> bool:
    """True if no process of any sandbox this test started still runs, once its call has returned.

    No grace period: ``Sandbox.call`` waits for every process of the call's session to exit.
    """
    assert _SESSIONS, "no sandbox recorded: the test module must call record_sessions"
    stray = {session: living_members(session) for session in _SESSIONS}
    stray = {session: pids for session, pids in stray.items() if pids}
    assert not stray, f"sandbox processes still running after their call returned: {stray}"
    return True


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
