"""Run untrusted Python in a separate, isolated, resource-limited process.

One process per call: ``Sandbox(config).call(source, function, arguments)`` executes ``source``
and calls ``function(**arguments)`` in a fresh ``python -I -B`` child whose JSON-serialisable return
value comes back in a :class:`SandboxResult`. Failures (exceptions, time-outs, limits) come back
as ``ok=False`` with a short ``error``; ``call`` itself never raises for anything the code does.

Host side (this module): a private temporary work directory as cwd (deleted afterwards), a clean
environment (no inherited variables, single-threaded BLAS), a new session so that the whole
process group is killed with SIGKILL at the wall-clock limit and again after every call, output
of the code captured to a size-limited file instead of a pipe.

Child side (``_sandbox_child.py``; its docstring details each layer): network/mount/PID
namespaces, a read-only filesystem except the work directory, rlimits (CPU, address space, file
size, open files, processes, no core), an unprivileged uid with ``no_new_privs``, and a Python
audit hook refusing sockets, process creation, ctypes and writes outside the work directory.

What each layer really guarantees:

- network namespace: kernel-enforced, no route anywhere (not even the host's loopback).
- read-only mounts + unprivileged uid: kernel-enforced; the code can still *read* whatever the
  nobody user can read (world-readable files), but cannot write outside the work directory nor
  undo the mounts (it has no capabilities).
- PID namespace: kernel-enforced; every process the code forks dies when the call ends.
- rlimits: kernel-enforced per process; ``RLIMIT_NPROC`` counts every process of the nobody uid
  (shared by concurrent sandboxes) and binds only because the uid is dropped from root.
- audit hook: a Python-level check, bypassable by native code; defence in depth, and the only
  network/write barrier left where namespaces are unavailable (non-root without user namespaces).

``namespaces: "auto"`` uses namespaces where the kernel allows them and reports which layers were
active in every result (``SandboxResult.layers``); ``"require"`` refuses to run without them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("_sandbox_child.py")
_MAX_RESULT_BYTES = 4 * 2**20
_OUTPUT_TAIL_CHARS = 2000


class SandboxConfig(BaseModel):
    """Limits and isolation of one sandboxed call."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    wall_seconds: float = Field(default=10.0, gt=0.0, le=600.0)
    """Wall-clock limit of one call, start-up included; the process group is then killed."""
    cpu_seconds: int = Field(default=5, ge=1, le=600)
    """CPU-time limit (RLIMIT_CPU) of the code."""
    memory_mb: int = Field(default=1024, ge=64)
    """Address-space limit (RLIMIT_AS) in MiB; Python with numpy needs about 300."""
    file_size_mb: int = Field(default=8, ge=1)
    """Largest file the code may write (RLIMIT_FSIZE), in MiB."""
    processes: int = Field(default=64, ge=1)
    """RLIMIT_NPROC for the unprivileged uid (counts all its processes and threads)."""
    open_files: int = Field(default=64, ge=16)
    """RLIMIT_NOFILE."""
    namespaces: Literal["auto", "require", "off"] = "auto"
    """Use network/mount/PID namespaces when available (auto), insist on them, or skip them."""
    audit_hook: bool = True
    """Install the Python audit hook (sockets, processes, ctypes, writes outside the work directory)."""


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    """The call returned a JSON-serialisable value."""
    value: Any = None
    """The call's return value (JSON round-tripped)."""
    error: str = ""
    """Why the call failed ("" when ok): exception, time-out, limit."""
    layers: tuple[str, ...] = ()
    """Isolation layers that were active in the child."""
    notes: tuple[str, ...] = ()
    """Layers that could not be set up, and why."""
    output: str = ""
    """The tail of what the code printed."""
    wall_seconds: float = 0.0
    timed_out: bool = field(default=False)


class Sandbox:
    """Runs one call per fresh child process; thread-safe (no shared state between calls)."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()

    def call(self, source: str, function: str, arguments: dict[str, Any] | None = None) -> SandboxResult:
        started = time.monotonic()
        workdir = os.path.realpath(tempfile.mkdtemp(prefix="lecritique-sandbox-"))
        job = {
            "source": source,
            "function": function,
            "arguments": arguments or {},
            "namespaces": self.config.namespaces,
            "audit_hook": self.config.audit_hook,
            "limits": {
                "cpu_seconds": self.config.cpu_seconds,
                "memory_bytes": self.config.memory_mb * 2**20,
                "file_size_bytes": self.config.file_size_mb * 2**20,
                "processes": self.config.processes,
                "open_files": self.config.open_files,
            },
        }
        try:
            payload = json.dumps(job).encode()
        except (TypeError, ValueError) as error:
            shutil.rmtree(workdir, ignore_errors=True)
            return SandboxResult(False, error=f"arguments are not JSON-serialisable: {error}")
        try:
            return self._run(payload, workdir, started)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, payload: bytes, workdir: str, started: float) -> SandboxResult:
        environment = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        bootstrap_log = os.path.join(workdir, ".bootstrap.txt")
        timed_out = False
        with open(bootstrap_log, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-I", "-B", str(CHILD)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                cwd=workdir,
                env=environment,
                start_new_session=True,
                close_fds=True,
            )
            try:
                process.communicate(payload, timeout=self.config.wall_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # Kill the whole group even after a normal exit: nothing the code started outlives the call.
                _kill_group(process.pid)
                process.wait()
        elapsed = time.monotonic() - started
        report = _read_json(os.path.join(workdir, ".result.json"))
        output = _tail(os.path.join(workdir, ".output.txt"))
        layers = tuple(report.get("layers", ())) if report else ()
        notes = tuple(report.get("notes", ())) if report else ()
        if timed_out:
            error = f"wall-clock limit of {self.config.wall_seconds:g} s exceeded"
            return SandboxResult(False, None, error, layers, notes, output, elapsed, True)
        code = process.returncode
        if report is not None and report.get("ok") and code == 0:
            return SandboxResult(True, report.get("value"), "", layers, notes, output, elapsed)
        if code >= 128 or code < 0:
            number = code - 128 if code >= 128 else -code
            error = _signal_reason(number)
        elif report is not None and report.get("error"):
            error = str(report["error"])
        else:
            error = f"sandbox exited with code {code}: {_tail(bootstrap_log, 300).strip()}"
        return SandboxResult(False, None, error, layers, notes, output, elapsed)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _signal_reason(number: int) -> str:
    if number == signal.SIGXCPU:
        return "CPU time limit exceeded"
    if number == signal.SIGKILL:
        return "killed (CPU hard limit or out of memory)"
    if number == signal.SIGXFSZ:
        return "file size limit exceeded"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = str(number)
    return f"killed by signal {name}"


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        if os.path.getsize(path) > _MAX_RESULT_BYTES:
            return {"ok": False, "error": f"result larger than {_MAX_RESULT_BYTES} bytes"}
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _tail(path: str, chars: int = _OUTPUT_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4 * chars))
            return handle.read().decode("utf-8", "replace")[-chars:]
    except OSError:
        return ""


@cache
def active_layers(namespaces: Literal["auto", "require", "off"] = "auto") -> tuple[str, ...]:
    """The isolation layers a sandboxed call gets on this machine (probed once per process)."""
    result = Sandbox(SandboxConfig(namespaces=namespaces)).call("def probe():\n    return 1\n", "probe")
    if not result.ok:
        logger.warning("sandbox probe failed: %s", result.error)
    for note in result.notes:
        logger.info("sandbox: %s", note)
    return result.layers
