"""Launchers behind one interface: ``local`` (processes) and ``kubernetes`` (objects in a cluster).

A launcher turns a validated spec into running workloads and back: :meth:`check` rejects specs it
could not run (before anything is recorded), :meth:`launch` starts them and returns a small JSON
handle kept in the experiment record, :meth:`poll` reports where they stand, :meth:`cancel`
stops them, and :meth:`release` frees what a finished experiment still holds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from lecritique.config.experiment import ExperimentSpec
from lecritique.launch.processes import child_environment

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]

LaunchState = Literal["running", "succeeded", "failed", "cancelled"]


@dataclass(frozen=True)
class Observation:
    state: LaunchState
    """Where the experiment's workloads stand."""
    message: str | None = None
    """Why it failed, when it did."""


class ExperimentLauncher(Protocol):
    name: str

    def check(self, spec: ExperimentSpec, experiment_id: str) -> None:
        """Raise :class:`~lecritique.config.experiment.SpecError` if this launcher cannot run the spec."""

    def launch(self, spec: ExperimentSpec, experiment_id: str) -> dict[str, Any]:
        """Start the experiment; returns the handle stored in its record."""

    def poll(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        """Current state of a launched experiment."""

    def cancel(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        """Start stopping it; ``cancelled`` once nothing of it runs any more, else ``running``."""

    def release(self, experiment_id: str, handle: dict[str, Any]) -> None:
        """Free what a finished experiment still holds (idempotent)."""


# ---- local ---------------------------------------------------------------------------------


def _process_start_ticks(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (tells a reused pid from ours)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19])


def _alive(pid: int, start_ticks: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        state = "?"
    if state == "Z":
        return False
    return start_ticks is None or _process_start_ticks(pid) == start_ticks


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before children (services run in sessions of their own)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop(0)
        children = [child for child, parent in parents.items() if parent == current and child not in found]
        found.extend(children)
        frontier.extend(children)
    return found


def _kill_tree(pid: int) -> None:
    """SIGKILL a process, everything below it, and the process groups they lead."""
    for target in [pid, *_descendants(pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(target) == target:
                os.killpg(target, signal.SIGKILL)
            else:
                os.kill(target, signal.SIGKILL)


class LocalProcessLauncher:
    """Each experiment is ``lecritique run`` in its own session, under a small supervisor.

    Its metrics land in the API's Redis (``REDIS_URL`` is passed down), its files in
    ``runs_dir/<id>/``. It keeps running if the API restarts; the record's handle (pid, start
    time, result file) is all a new API process needs to poll or cancel it.
    """

    name = "local"

    def __init__(self, runs_dir: Path, redis_url: str, *, cancel_grace_seconds: float = 90.0) -> None:
        self.runs_dir = Path(runs_dir).resolve()
        self.redis_url = redis_url
        self.cancel_grace_seconds = cancel_grace_seconds
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def check(self, spec: ExperimentSpec, experiment_id: str) -> None:
        """Every valid spec runs locally (placement is ignored)."""

    def launch(self, spec: ExperimentSpec, experiment_id: str) -> dict[str, Any]:
        run_dir = self.runs_dir / experiment_id
        run_dir.mkdir(parents=True, exist_ok=True)
        spec_path = run_dir / "spec.json"
        # `lecritique run` names its Redis keys and metric labels after spec.name; the API's id
        # must be that name so that GET /metrics finds the series.
        spec_path.write_text(spec.model_copy(update={"name": experiment_id}).model_dump_json(indent=1))
        result = run_dir / "result.json"
        result.unlink(missing_ok=True)
        env = child_environment(REPO_ROOT if (REPO_ROOT / "libs" / "lecritique").is_dir() else None)
        env["REDIS_URL"] = self.redis_url
        command = [
            sys.executable, "-m", "services.api.supervise", "--result", str(result), "--",
            sys.executable, "-m", "lecritique", "run", str(spec_path), "--out", str(run_dir / "run"),
            "--redis-url", self.redis_url,
        ]
        log = (run_dir / "run.log").open("ab")
        try:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=str(REPO_ROOT), start_new_session=True,
            )
        finally:
            log.close()
        self._children[experiment_id] = process
        logger.info("experiment %s: started lecritique run (pid %d) in %s", experiment_id, process.pid, run_dir)
        return {
            "pid": process.pid,
            "start_ticks": _process_start_ticks(process.pid),
            "run_dir": str(run_dir),
            "result": str(result),
            "log": str(run_dir / "run.log"),
        }

    def _running(self, experiment_id: str, handle: dict[str, Any]) -> bool:
        child = self._children.get(experiment_id)
        if child is not None:
            # Our own child: poll() reaps it, so it never lingers as a zombie.
            return child.poll() is None
        return _alive(int(handle["pid"]), handle.get("start_ticks"))

    def _log_tail(self, handle: dict[str, Any], lines: int = 20) -> str:
        try:
            return "\n".join(Path(handle["log"]).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def poll(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        result_path = Path(handle["result"])
        if self._running(experiment_id, handle):
            return Observation("running")
        self._children.pop(experiment_id, None)
        try:
            result = json.loads(result_path.read_text())
        except (OSError, ValueError):
            return Observation("failed", "the run's supervisor exited without recording a result:\n" + self._log_tail(handle))
        if result.get("cancelled"):
            return Observation("cancelled")
        if result["returncode"] == 0:
            return Observation("succeeded")
        return Observation("failed", f"lecritique run exited with code {result['returncode']}:\n{self._log_tail(handle)}")

    def cancel(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        """SIGTERM the supervisor once (it stops the run gracefully); SIGKILL everything after the grace period."""
        pid = int(handle["pid"])
        if not self._running(experiment_id, handle):
            observation = self.poll(experiment_id, handle)
            return observation if observation.state != "succeeded" else Observation("cancelled")
        if "cancel_requested_at" not in handle:
            handle["cancel_requested_at"] = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        elif time.time() - float(handle["cancel_requested_at"]) > self.cancel_grace_seconds:
            logger.warning("experiment %s did not stop within %.0f s; killing all its processes", experiment_id, self.cancel_grace_seconds)
            _kill_tree(pid)
        return Observation("running")

    def release(self, experiment_id: str, handle: dict[str, Any]) -> None:
        """Nothing to free: a finished ``lecritique run`` has stopped its services itself."""


# ---- kubernetes ----------------------------------------------------------------------------


class KubernetesExperimentLauncher:
    """Experiments as Kubernetes objects (see :mod:`lecritique.launch.kubernetes`)."""

    name = "kubernetes"

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher

    @classmethod
    def from_files(cls, defaults_path: Path, namespace: str | None = None) -> KubernetesExperimentLauncher:
        from lecritique.launch.components import ChartDefaults
        from lecritique.launch.kubernetes_launcher import KubernetesLauncher

        defaults = ChartDefaults.model_validate_json(Path(defaults_path).read_text())
        if namespace:
            defaults = defaults.model_copy(update={"namespace": namespace})
        return cls(KubernetesLauncher(defaults))

    def check(self, spec: ExperimentSpec, experiment_id: str) -> None:
        self.launcher.render(spec, experiment_id)

    def launch(self, spec: ExperimentSpec, experiment_id: str) -> dict[str, Any]:
        self.launcher.launch(spec, experiment_id)
        return {"namespace": self.launcher.defaults.namespace}

    def poll(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        status = self.launcher.job_status(experiment_id)
        if status.state in ("pending", "running"):
            return Observation("running")
        if status.state == "missing":
            return Observation("failed", "the orchestrator Job no longer exists")
        return Observation(status.state, status.message or None)

    def cancel(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        self.launcher.delete(experiment_id)
        return Observation("cancelled")

    def release(self, experiment_id: str, handle: dict[str, Any]) -> None:
        # Keep the finished Job for its logs (it expires by itself); free the GPUs now.
        self.launcher.delete(experiment_id, keep_job=True)
