"""Run untrusted Python in a separate, isolated, resource-limited process.

One process tree per call: ``Sandbox(config).call(source, function, arguments)`` executes
``source`` and calls ``function(**arguments)`` in a fresh ``python -I -B`` child whose
JSON-serialisable return value comes back in a :class:`SandboxResult`. Failures (exceptions,
time-outs, limits, a missing isolation layer) come back as ``ok=False`` with a short ``error``;
``call`` itself never raises for anything the code does.

Host side (this module and :mod:`lecritique.envs.sandbox_io`): a clean environment, a new
session killed with SIGKILL at the wall-clock limit and after every call, and I/O that the code
cannot redirect: the job, the child's log and the code's output are anonymous memory files, the
outcome comes back as JSON frames on a pipe the host created, read with a deadline and a size
bound. The host never opens a path inside the work directory.

Child side (:mod:`lecritique.envs._sandbox`; each module documents its layer): new network,
mount, PID, IPC and UTS namespaces (plus a user namespace as non-root); a private read-only root
holding only the interpreter, its standard library, the allowed ``packages`` and the work
directory, a size-limited tmpfs; a private ``/proc``; rlimits; uid nobody (or the caller's
unprivileged uid) with no capabilities and ``no_new_privs``; a seccomp filter (libseccomp)
denying process creation, mounts, namespaces, ptrace, sockets and the kernel's rarer surfaces;
the Python audit hook as a second layer. Every layer is verified from inside the untrusted
process before the code runs, and reported in ``SandboxResult.layers``; a required layer that
does not hold stops the call (``error`` names it). ``docs/security.md`` has the threat model.

``namespaces``: ``auto`` uses the namespaces whenever the kernel lets the child create them
(then all namespace layers are required), and otherwise runs with the base layers (rlimits, no
root, no capabilities, no_new_privs, seccomp); ``require`` refuses to run without namespaces;
``off`` never tries. Where the kernel lets the child unshare but the runtime keeps it from
mounting its private ``/proc`` (podman's and CRI-O's defaults), ``auto`` notices it once, from a
probe (:func:`usable_mode`), and runs with the base layers. In no mode does untrusted code run as
root.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lecritique.envs._sandbox import protocol
from lecritique.envs.sandbox_io import ChildFiles, Received, receive, tail
from lecritique.envs.sandbox_reap import kill_session

logger = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("_sandbox_child.py")
_MAX_RESULT_BYTES = 4 * 2**20
_OUTPUT_TAIL_CHARS = 2000
_LOG_TAIL_CHARS = 300
_REAP_SECONDS = 5.0


DEFAULT_PACKAGES = ("numpy", "sympy", "mpmath", "yaml", "dateutil", "six")
"""Site-packages modules sandboxed code may import unless a spec names others."""


class SandboxConfig(BaseModel):
    """Limits and isolation of one sandboxed call."""

    # In a tenant's spec these are the operator's: a spec may tighten them, never loosen them
    # (lecritique.tenancy.sandbox_settings checks every field holding one).
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_extra={"x-tenant-rule": "sandbox_settings"},
    )

    wall_seconds: float = Field(default=10.0, gt=0.0, le=600.0)
    """Wall-clock limit of one call, start-up included; the process tree is then killed."""
    cpu_seconds: int = Field(default=5, ge=1, le=600)
    """CPU-time limit (RLIMIT_CPU) of the code."""
    memory_mb: int = Field(default=1024, ge=64)
    """Address-space limit (RLIMIT_AS) in MiB; Python with numpy needs about 300."""
    file_size_mb: int = Field(default=8, ge=1)
    """Largest file the code may write (RLIMIT_FSIZE), in MiB; also bounds its printed output."""
    disk_mb: int = Field(default=32, ge=1, le=4096)
    """Total size of the work directory (a tmpfs, held in memory) in MiB; needs the namespaces."""
    processes: int = Field(default=64, ge=1)
    """RLIMIT_NPROC for the sandbox uid (counts all its processes and threads)."""
    open_files: int = Field(default=64, ge=16)
    """RLIMIT_NOFILE."""
    packages: tuple[str, ...] = Field(
        default=DEFAULT_PACKAGES, json_schema_extra={"x-tenant-rule": "sandbox_package"}
    )
    """Top-level modules of the interpreter's site-packages the code may import (read-only)."""
    namespaces: Literal["auto", "require", "off"] = "auto"
    """Namespaces and the private root when the kernel allows them (auto), always, or never."""
    audit_hook: bool = True
    """Install the Python audit hook (sockets, processes, ctypes, writes outside the work directory)."""


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    """The call returned a JSON-serialisable value."""
    value: Any = None
    """The call's return value (JSON round-tripped)."""
    error: str = ""
    """Why the call failed ("" when ok): exception, time-out, limit, missing layer."""
    layers: tuple[str, ...] = ()
    """Isolation layers verified in the child before the code ran."""
    notes: tuple[str, ...] = ()
    """Layers that could not be set up, and why."""
    output: str = ""
    """The tail of what the code printed."""
    wall_seconds: float = 0.0
    timed_out: bool = field(default=False)


@cache
def _site_packages() -> list[str]:
    """This interpreter's site-packages directories (the child runs without the site module)."""
    return [path for path in site.getsitepackages() if os.path.isdir(path)]


def _environment(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class Sandbox:
    """Runs one call per fresh child process; thread-safe (no shared state between calls)."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()

    def _job(self, source: str, function: str, arguments: dict[str, Any]) -> dict[str, Any]:
        config = self.config
        return {
            "source": source,
            "function": function,
            "arguments": arguments,
            "namespaces": config.namespaces,
            "audit_hook": config.audit_hook,
            "packages": list(config.packages),
            "site_packages": _site_packages(),
            "disk_bytes": config.disk_mb * 2**20,
            "limits": {
                "cpu_seconds": config.cpu_seconds,
                "memory_bytes": config.memory_mb * 2**20,
                "file_size_bytes": config.file_size_mb * 2**20,
                "processes": config.processes,
                "open_files": config.open_files,
            },
        }

    def call(self, source: str, function: str, arguments: dict[str, Any] | None = None) -> SandboxResult:
        mode = usable_mode() if self.config.namespaces == "auto" else self.config.namespaces
        return self._call(mode, source, function, arguments or {})

    def _call(
        self, mode: Literal["auto", "require", "off"], source: str, function: str, arguments: dict[str, Any]
    ) -> SandboxResult:
        started = time.monotonic()
        job = self._job(source, function, arguments)
        job["namespaces"] = mode
        try:
            json.dumps(job)
        except (TypeError, ValueError) as error:
            return SandboxResult(False, error=f"arguments are not JSON-serialisable: {error}")
        # Empty on the host: with namespaces only the child's mount namespace puts a tmpfs here.
        workdir = os.path.realpath(tempfile.mkdtemp(prefix="lecritique-sandbox-"))
        files = ChildFiles()
        try:
            job.update(workdir=workdir, result_fd=files.result_write, output_fd=files.output)
            files.write_job(json.dumps(job).encode())
            return self._run(files, workdir, started)
        finally:
            files.close()
            shutil.rmtree(workdir, ignore_errors=True)  # fd-based: symlinks inside are not followed

    def _run(self, files: ChildFiles, workdir: str, started: float) -> SandboxResult:
        process = subprocess.Popen(
            # -S: no site module (a venv's .pth hooks cost tens of ms per call); the child adds
            # the site-packages directories it needs (pyseccomp, the allowed packages) itself.
            [sys.executable, "-I", "-B", "-S", str(CHILD)],
            stdin=files.job,
            stdout=files.log,
            stderr=files.log,
            pass_fds=(files.output, files.result_write),
            cwd=workdir,
            env=_environment(workdir),
            start_new_session=True,
            close_fds=True,
        )
        try:
            files.close_child_ends()
            received = receive(
                files.result_read, process.pid, started + self.config.wall_seconds, _MAX_RESULT_BYTES
            )
        finally:
            # Kill the whole session even after a normal exit, and wait for each of its processes:
            # nothing the code started outlives the call.
            stray = kill_session(process.pid, _REAP_SECONDS)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(_REAP_SECONDS)  # exited already, unless stuck in the kernel
            if stray:
                logger.error("sandbox processes %s still ran %g s after SIGKILL", stray, _REAP_SECONDS)
        report = _Report.parse(received)
        report.output = tail(files.output, _OUTPUT_TAIL_CHARS)
        report.log = tail(files.log, _LOG_TAIL_CHARS)
        return report.result(process.returncode, self.config.wall_seconds, time.monotonic() - started)


@dataclass
class _Report:
    """The frames of one call, read in the order the protocol trusts them."""

    received: Received
    layers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    ready: bool = False
    setup_error: str = ""
    outcome: dict[str, Any] | None = None
    output: str = ""
    log: str = ""

    @classmethod
    def parse(cls, received: Received) -> _Report:
        report = cls(received)
        for line in received.data.split(b"\n"):
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if not isinstance(frame, dict):
                continue
            stage = frame.get("stage")
            if not report.ready and stage in (protocol.FAILED, protocol.REFUSED):
                report.setup_error = str(frame.get("error", stage))
                report.notes = tuple(str(note) for note in frame.get("notes", ()))
                break
            if not report.ready and stage == protocol.READY:
                report.ready = True
                report.layers = tuple(str(layer) for layer in frame.get("layers", ()))
                report.notes = tuple(str(note) for note in frame.get("notes", ()))
            elif report.ready and stage == protocol.RESULT:
                report.outcome = frame
                break
        return report

    def result(self, code: int | None, wall_limit: float, elapsed: float) -> SandboxResult:
        def failed(error: str, timed_out: bool = False) -> SandboxResult:
            return SandboxResult(False, None, error, self.layers, self.notes, self.output, elapsed, timed_out)

        if self.received.timed_out:
            return failed(f"wall-clock limit of {wall_limit:g} s exceeded", timed_out=True)
        if self.received.too_large:
            return failed(f"result larger than {_MAX_RESULT_BYTES} bytes")
        if self.setup_error:
            return failed(self.setup_error)
        if code is None:
            return failed("the sandbox did not exit after SIGKILL")
        outcome = self.outcome or {}
        if outcome.get("ok") and code == 0:
            return SandboxResult(
                True, outcome.get("value"), "", self.layers, self.notes, self.output, elapsed
            )
        if code >= 128 or code < 0:
            return failed(_signal_reason(code - 128 if code >= 128 else -code))
        if outcome.get("error"):
            return failed(str(outcome["error"]))
        if self.ready:
            return failed(f"the code exited (code {code}) without returning")
        return failed(f"sandbox exited with code {code}: {self.log.strip()}")


def _signal_reason(number: int) -> str:
    if number == signal.SIGXCPU:
        return "CPU time limit exceeded"
    if number == signal.SIGKILL:
        return "killed (CPU hard limit or out of memory)"
    if number == signal.SIGXFSZ:
        return "file size limit exceeded"
    if number == signal.SIGSYS:
        return "killed by the seccomp filter (SIGSYS: a foreign system-call ABI)"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = str(number)
    return f"killed by signal {name}"


_PROBE_SOURCE = "def probe():\n    return 1\n"


@cache
def usable_mode() -> Literal["auto", "off"]:
    """What ``auto`` means on this machine: ``auto`` where a call with namespaces can set up, else
    ``off`` (probed once per process, and said once).

    Some runtimes let the child unshare but not mount a new ``/proc`` over the one they masked
    (podman's and CRI-O's default seccomp profile with a masked ``/proc``): there every call with
    namespaces would fail in its set-up. The probe runs no untrusted code, so nothing a policy
    writes can make this choice.
    """
    probe = Sandbox()._call("auto", _PROBE_SOURCE, "probe", {})
    if probe.ok or probe.layers or not probe.error.startswith("sandbox set-up failed"):
        return "auto"
    base = Sandbox(SandboxConfig(namespaces="off")).call(_PROBE_SOURCE, "probe")
    if not base.ok:
        return "auto"
    logger.warning(
        "sandbox: namespaces cannot be set up here (%s); running with the base layers", probe.error
    )
    return "off"


@cache
def active_layers(namespaces: Literal["auto", "require", "off"] = "auto") -> tuple[str, ...]:
    """The isolation layers a sandboxed call gets on this machine (probed once per process)."""
    result = Sandbox(SandboxConfig(namespaces=namespaces)).call("def probe():\n    return 1\n", "probe")
    if not result.ok:
        logger.warning("sandbox probe failed: %s", result.error)
    for note in result.notes:
        logger.info("sandbox: %s", note)
    return result.layers
