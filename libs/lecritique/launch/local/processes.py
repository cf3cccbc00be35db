"""Supervised child processes for local runs: start, wait until healthy, stop cleanly.

Each service runs as its own OS process (``python -m lecritique serve ...``), logs to its own
file, announces its bound ports in a port file, and is considered up once its gRPC health
check answers SERVING. Stopping sends SIGTERM to the whole process group (a service may have
children, e.g. torchrun ranks or vLLM's engine core), then SIGKILL after a grace period.
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
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lecritique.launch.local.signals import signals_deferred
from lecritique.tenancy.spec_rules import DATASET_ROOTS_ENV

logger = logging.getLogger(__name__)


def child_environment(repo_root: Path | None = None, threads: int = 1) -> dict[str, str]:
    """Environment of service processes: sources importable, one compute thread each.

    Every service computes on the same few cores; one intra-op thread per process avoids the
    oversubscription that makes several torch processes on two cores slower than one.
    """
    env = dict(os.environ)
    if repo_root is not None:
        paths = [str(repo_root / "libs"), str(repo_root)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env.setdefault("MKL_NUM_THREADS", str(threads))
    # Spinning OpenMP workers steal the cores other services need (measured: ~10x slower training).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONUNBUFFERED"] = "1"
    return env


VERIFIER_VARIABLES = (
    *("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "PYTHONUNBUFFERED"),
    *("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY"),
    *("TOKENIZERS_PARALLELISM", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"),
    DATASET_ROOTS_ENV,
    *("LECRITIQUE_SCORING_WORKERS", "LECRITIQUE_ANSWER_SECONDS"),  # lecritique.envs.isolation
)
"""What the environment verifier's process keeps of the launcher's environment: none of it a credential."""


def verifier_environment(env: dict[str, str]) -> dict[str, str]:
    """The environment-verifier's environment: ``env`` cut down to ``VERIFIER_VARIABLES``.

    It scores what the policy writes, and uses no Redis, LLM or tracker: whatever a scorer might
    be made to run there finds no password, key or token (issue #37).
    """
    return {name: env[name] for name in VERIFIER_VARIABLES if name in env}


@dataclass
class ManagedProcess:
    name: str
    command: list[str]
    log_path: Path
    port_file: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    grpc_port: int | None = None
    metrics_port: int | None = None
    stop_signalled: bool = False

    def start(self) -> None:
        self.stop_signalled = False
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.port_file is not None:
            self.port_file.unlink(missing_ok=True)
        log = self.log_path.open("ab")
        logger.info("starting %s: %s", self.name, " ".join(self.command))
        # Deferred: a stop signal inside Popen, after the fork, would lose the child's handle.
        with signals_deferred():
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env or None,
                start_new_session=True,
            )
        log.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def address(self) -> str:
        if self.grpc_port is None:
            raise RuntimeError(f"{self.name} has not announced its port yet")
        return f"127.0.0.1:{self.grpc_port}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def read_port_file(self) -> bool:
        """Pick up the ports the process announced; True once they are known."""
        if self.port_file is None or not self.port_file.exists():
            return False
        ports = json.loads(self.port_file.read_text())
        self.grpc_port, self.metrics_port = ports.get("grpc"), ports.get("metrics")
        return True

    def wait_ready(self, timeout: float) -> None:
        """Wait for the port file and a SERVING health check; fail early if the process dies."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(
                    f"{self.name} exited with code {self.process and self.process.returncode}:\n{self.log_tail()}"
                )
            if self.grpc_port is None:
                self.read_port_file()
            if self.grpc_port is not None and serving(self.address):
                logger.info("%s ready on %s (metrics %s)", self.name, self.address, self.metrics_port)
                return
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def signal_stop(self) -> None:
        """SIGTERM to the process group without waiting, once per start (torchrun treats a second
        one as a new fault), so that a launcher can stop all its services at the same time."""
        if self.process is not None and self.process.poll() is None and not self.stop_signalled:
            self.stop_signalled = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self, grace: float = 15.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.signal_stop()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop within %.0f s; killing it", self.name, grace)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode

    def restart(self) -> None:
        """Start again on the port it had (clients keep its address); a fresh metrics port."""
        if self.grpc_port is not None and "--port" in self.command:
            index = self.command.index("--port") + 1
            self.command = [*self.command[:index], str(self.grpc_port), *self.command[index + 1 :]]
        self.start()

    def kill(self) -> None:
        """Hard kill (tests of fault tolerance)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def serving(address: str, timeout: float = 1.0) -> bool:
    """Whether ``address`` answers its gRPC health check with SERVING within ``timeout``."""
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


def python_command(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def service_command(
    service: str,
    *,
    spec: Path,
    experiment: str,
    weights_dir: Path,
    state_dir: Path,
    port_file: Path,
    processes: int = 1,
) -> list[str]:
    """``lecritique serve SERVICE`` on loopback with OS-chosen ports announced in ``port_file``
    (under torchrun when ``processes`` > 1): the one command line of a local service."""
    args = [
        "lecritique",
        "serve",
        service,
        "--spec",
        str(spec),
        "--experiment",
        experiment,
        "--weights-dir",
        str(weights_dir),
        "--state-dir",
        str(state_dir),
        "--port",
        "0",
        "--metrics-port",
        "0",
        "--host",
        "127.0.0.1",
        "--port-file",
        str(port_file),
    ]
    if processes <= 1:
        return python_command(*args)
    distributed = ["torch.distributed.run", "--standalone", f"--nproc_per_node={processes}", "-m"]
    return python_command(*distributed, *args)


def orchestrator_command(
    *,
    spec: Path,
    out: Path,
    experiment: str,
    addresses: dict[str, list[str]],
    port_file: Path | None = None,
    metrics_port: int = 0,
    redis_url: str | None = None,
) -> list[str]:
    """``lecritique orchestrate`` against the services at ``addresses`` (name -> host:port list);
    the value plane's services only when they run."""
    args = ["lecritique", "orchestrate", "--spec", str(spec), "--out", str(out), "--experiment", experiment]
    for name in ("rollout", "environment", "policy-trainer", "value-evaluator", "value-trainer"):
        if name in addresses:
            args += [f"--{name}", ",".join(addresses[name])]
    args += ["--metrics-port", str(metrics_port)]
    if port_file is not None:
        args += ["--port-file", str(port_file)]
    if redis_url is not None:
        args += ["--redis-url", redis_url]
    return python_command(*args)
