"""The ``local`` launcher: every service of one experiment as a local process on loopback.

Order: Redis (embedded unless ``REDIS_URL``) -> environment-verifier, policy-trainer (publishes
policy version 0), value-trainer (publishes critic version 0) -> rollout and value-evaluator
replicas (they serve the newest published versions) -> the orchestrator. While the orchestrator
runs, :class:`~lecritique.launch.local.restarts.Supervisor` restarts any service (or embedded Redis)
that exits or hangs, on the same port, as Kubernetes would. Everything is stopped in reverse
order on exit, failure or Ctrl-C. The run directory keeps the resolved spec, logs,
weights, Redis data and the orchestrator's checkpoint, so running again resumes.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.launch import redis_acl
from lecritique.launch.local.pools import CorePools, pin_process, pinned_command
from lecritique.launch.local.processes import (
    ManagedProcess,
    child_environment,
    orchestrator_command,
    service_command,
    verifier_environment,
)
from lecritique.launch.local.restarts import Supervisor
from lecritique.launch.local.signals import signals_deferred
from lecritique.run_folder import RunFolder

if TYPE_CHECKING:
    from lecritique.redis_connection import EmbeddedRedis

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[4]


class SpecDrift(ValueError):
    """A run folder holds a run of another spec; the message lists the changed fields."""


EXTENDABLE = "orchestrator.steps"
"""The one field ``--extend`` may change in a run folder (more steps of the same run)."""


def check_recorded_spec(
    out_dir: Path,
    spec: ExperimentSpec,
    *,
    extend: bool = False,
    same_model: Callable[[str, str], bool] | None = None,
) -> str | None:
    """Refuse to run ``spec`` in a folder whose ``spec.json`` records a different one.

    Raises :class:`SpecDrift` naming every changed field, unless the only change is
    ``orchestrator.steps`` and ``extend`` is set; then returns the line that says so. Returns
    None when the folder records no spec (a new run) or the same one. ``same_model(recorded,
    new)``: whether two ``policy.path`` values name the same model (a tiny build's cache folder
    compared by its build settings, ``tinybuild.identity.same_build``), so a spec is compared as
    its user wrote it rather than by where its model was resolved.
    """
    from lecritique.config.changes import spec_changes
    from lecritique.config.experiment import SpecError, parse_spec

    recorded_path = RunFolder(Path(out_dir)).spec_path
    if not recorded_path.is_file():
        return None
    try:
        recorded = parse_spec(json.loads(recorded_path.read_text()), spec_dir=recorded_path.parent)
    except (ValueError, SpecError) as error:
        raise SpecDrift(
            f"{recorded_path} does not hold a spec this version can read ({error}); "
            "--force starts the run again from scratch"
        ) from None
    changes = [
        change
        for change in spec_changes(recorded, spec)
        if not (
            change.field == "policy.path"
            and same_model is not None
            and same_model(change.before, change.after)
        )
    ]
    if not changes:
        return None
    others = [change for change in changes if change.field != EXTENDABLE]
    if extend and not others:
        change = changes[0]
        return f"--extend: {out_dir} continues from {change.before} to {change.after} policy steps"
    listed = "; ".join(str(change) for change in (others if extend else changes))
    more = spec.orchestrator.steps - recorded.orchestrator.steps
    if extend:
        advice = "--extend changes only orchestrator.steps"
    elif not others and more > 0:
        advice = f"--extend {more} continues it to {spec.orchestrator.steps} policy steps"
    else:
        advice = "--extend N continues it for N more policy steps when nothing else changed"
    raise SpecDrift(
        f"{out_dir} holds a run of a different spec ({listed}). A run folder describes what was "
        f"trained: --force starts it again from scratch; {advice}; or choose another --out."
    )


def start_locked_redis(
    data_dir: Path, *, port: int | None = None, password: str | None = None
) -> tuple[EmbeddedRedis, str]:
    """An embedded Redis whose only user needs a password (random unless given) from before it
    listens; the server and the URL that carries the password.

    It listens on loopback only, but every local user can reach loopback: without a password any
    of them could read or rewrite the run's replay data.
    """
    from lecritique.redis_connection import start_embedded_redis

    password = password or secrets.token_hex(24)
    server = start_embedded_redis(data_dir, port=port, acl=redis_acl.run_acl(password))
    return server, redis_acl.user_url(server.url, "default", password)


class LocalLauncher:
    def __init__(
        self,
        spec: ExperimentSpec,
        out_dir: Path,
        *,
        redis_url: str | None = None,
        experiment_id: str | None = None,
        core_pools: CorePools | None = None,
    ) -> None:
        self.spec = spec
        self.core_pools = core_pools
        """Two emulated node pools (None: every process may use every core)."""
        self.out_dir = Path(out_dir).resolve()
        self.experiment_id = experiment_id or spec.name
        self.redis_url = redis_url or os.environ.get("REDIS_URL")
        self.redis: Any = None
        self.services: list[ManagedProcess] = []
        self.orchestrator: ManagedProcess | None = None
        self.env = child_environment(REPO_ROOT if (REPO_ROOT / "libs" / "lecritique").is_dir() else None)
        self.spec_path = RunFolder(self.out_dir).spec_path
        self.weights_dir = self.out_dir / "weights"
        self.supervisor = Supervisor(self.out_dir / "logs" / "supervisor.jsonl")
        self._redis_password = ""

    # ---- start-up ------------------------------------------------------------------------
    def _child_env(self) -> dict[str, str]:
        """The services' environment; the Redis URL (which may carry a password) travels here,
        never on a command line that any local user can read with ``ps``."""
        return {**self.env, "REDIS_URL": self.redis_url} if self.redis_url else dict(self.env)

    def service_environment(self, service: str) -> dict[str, str]:
        """The environment of ``lecritique serve SERVICE``: the environment verifier, which runs
        scorers on what the policy writes and needs no Redis, gets no credential at all."""
        return verifier_environment(self.env) if service == "environment" else self._child_env()

    def _service(
        self, name: str, service: str, *, extra_env: dict[str, str] | None = None, torchrun: int = 1
    ) -> ManagedProcess:
        run_dir = self.out_dir / "run"
        command = service_command(
            service,
            spec=self.spec_path,
            experiment=self.experiment_id,
            weights_dir=self.weights_dir,
            state_dir=self.out_dir / "state",
            port_file=run_dir / f"{name}.json",
            processes=torchrun,
        )
        process = ManagedProcess(
            name=name,
            command=self._pinned(name, command),
            log_path=self.out_dir / "logs" / f"{name}.log",
            port_file=run_dir / f"{name}.json",
            env={**self.service_environment(service), **(extra_env or {})},
        )
        return self._start_and_keep(process)

    def _pinned(self, name: str, command: list[str]) -> list[str]:
        """``command`` on its pool's cores when the pools are emulated (restarts reuse the command)."""
        return command if self.core_pools is None else pinned_command(command, self.core_pools.cores_of(name))

    def _start_and_keep(self, process: ManagedProcess) -> ManagedProcess:
        """Start ``process`` and make it one of the services :meth:`stop` reaches, with no stop
        signal in between: a SIGTERM landing after the fork but before the append orphaned it."""
        with signals_deferred():
            process.start()
            self.services.append(process)
        return process

    def completed_step(self) -> int:
        """The last policy step an earlier run in this directory completed (0: a fresh run)."""
        return RunFolder(self.out_dir).completed_step()

    def start_services(
        self, timeout: float = 600.0, on_stage: Callable[[str], None] | None = None
    ) -> dict[str, list[str]]:
        """Start Redis and every service; returns each service's addresses once all are healthy.
        ``on_stage`` hears each stage as it begins (the command prints them)."""
        stage = on_stage or (lambda text: None)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.spec_path.write_text(self.spec.model_dump_json(indent=1))
        if self.redis_url is None:
            stage(f"starting the embedded Redis (data in {self.out_dir / 'redis'})")
            self._redis_password = secrets.token_hex(24)
            with signals_deferred():  # a Redis server started but not kept would outlive the run
                self.redis, self.redis_url = start_locked_redis(
                    self.out_dir / "redis", password=self._redis_password
                )
            if self.core_pools is not None:
                pin_process(self.redis.process.pid, self.core_pools.cores_of("redis"))
        spec = self.spec
        names = ["environment", "policy-trainer"] + (["value-trainer"] if spec.critic is not None else [])
        stage(f"starting {', '.join(names)} (the trainers load the models)")
        first = [
            self._service("environment", "environment"),
            self._service("policy-trainer", "policy-trainer", torchrun=spec.policy_trainer.processes),
        ]
        if spec.critic is not None:
            first.append(
                self._service("value-trainer", "value-trainer", torchrun=spec.critic.trainer_processes()[0])
            )
        for process in first:
            process.wait_ready(timeout)
        second_names = [f"rollout-{i}" for i in range(spec.rollout.replicas)] + (
            [f"value-evaluator-{i}" for i in range(spec.critic.evaluator_replicas)]
            if spec.critic is not None
            else []
        )
        stage(f"starting {', '.join(second_names)} (they load the published weights)")
        second = [self._service(f"rollout-{i}", "rollout") for i in range(spec.rollout.replicas)]
        if spec.critic is not None:
            second += [
                self._service(f"value-evaluator-{i}", "value-evaluator")
                for i in range(spec.critic.evaluator_replicas)
            ]
        for process in second:
            process.wait_ready(timeout)
        return self.addresses()

    def addresses(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for process in self.services:
            kind = process.name.rsplit("-", 1)[0] if process.name[-1].isdigit() else process.name
            grouped.setdefault(kind, []).append(process.address)
        return grouped

    def start_orchestrator(
        self, extra_env: dict[str, str] | None = None, metrics_port: int = 0
    ) -> ManagedProcess:
        """The orchestrator against the started services; its Prometheus metrics on
        ``metrics_port`` (0: a free port, in its port file), for a scraper that must know it first."""
        command = orchestrator_command(
            spec=self.spec_path,
            out=self.out_dir,
            experiment=self.experiment_id,
            addresses=self.addresses(),
            port_file=self.out_dir / "run" / "orchestrator.json",
            metrics_port=metrics_port,
        )
        self.orchestrator = ManagedProcess(
            name="orchestrator",
            command=self._pinned("orchestrator", command),
            log_path=self.out_dir / "logs" / "orchestrator.log",
            port_file=self.out_dir / "run" / "orchestrator.json",
            env={**self._child_env(), **(extra_env or {})},
        )
        self.orchestrator.start()
        return self.orchestrator

    # ---- running -------------------------------------------------------------------------
    def wait(self, on_metrics: Callable[[dict[str, Any]], None] | None = None, poll: float = 0.5) -> int:
        """Follow metrics.jsonl until the orchestrator exits, supervising the services meanwhile."""
        assert self.orchestrator is not None
        metrics_path = RunFolder(self.out_dir).metrics_path
        offset = metrics_path.stat().st_size if metrics_path.exists() else 0
        while True:
            if metrics_path.exists() and on_metrics is not None:
                with metrics_path.open() as handle:
                    handle.seek(offset)
                    for line in handle:
                        if line.endswith("\n"):
                            on_metrics(json.loads(line))
                            offset += len(line.encode())
            code = self.orchestrator.process.poll() if self.orchestrator.process else 0
            if code is not None:
                return code
            self.redis = self.supervisor.check_redis(self.redis, self._restart_redis)
            for process in self.services:
                self.supervisor.check(process)
            time.sleep(poll)

    def _restart_redis(self) -> Any:
        """Embedded Redis again, on its port and data directory (it reloads the AOF), same password."""
        server, _ = start_locked_redis(
            self.out_dir / "redis", port=self.redis.port, password=self._redis_password
        )
        if self.core_pools is not None:
            pin_process(server.process.pid, self.core_pools.cores_of("redis"))
        return server

    def stop(self) -> None:
        if self.orchestrator is not None:
            self.orchestrator.stop()
        # All at once: each drains in about a second, so one after another would add up.
        for process in self.services:
            process.signal_stop()
        for process in reversed(self.services):
            process.stop()
        self.services.clear()
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
