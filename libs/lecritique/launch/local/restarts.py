"""Supervision of one local run's services, as Kubernetes would do it for their pods.

A service that exits is restarted on the same port (its clients keep their address), after a
backoff that doubles with each restart (1 s, 2 s, 4 s, ... capped at 30 s: CrashLoopBackOff); a
service restarted more than ``max_restarts`` times fails the run. A service whose health check
does not answer ``liveness_failures`` times in a row (hung: SIGSTOP, a deadlock) is killed and
restarted (a liveness probe). Embedded Redis is restarted on its port and data directory, so it
reloads its AOF. Every exit, kill, restart and return to health is logged and appended to
``logs/supervisor.jsonl`` (the chaos timeline reads it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lecritique.launch.local.processes import ManagedProcess, serving

logger = logging.getLogger(__name__)


@dataclass
class _Watch:
    """What the supervisor knows of one service."""

    restarts: int = 0
    restart_at: float | None = None
    """When the pending restart is due (None: running)."""
    unhealthy: int = 0
    """Consecutive failed health checks."""
    recovering: bool = False
    """Restarted, not yet healthy."""
    checked_at: float = 0.0


@dataclass
class Supervisor:
    events_path: Path
    max_restarts: int = 5
    """Restarts of one service before the run fails."""
    backoff_seconds: float = 1.0
    """Delay before the first restart; doubles per restart, at most ``max_backoff_seconds``."""
    max_backoff_seconds: float = 30.0
    liveness_every_seconds: float = 2.0
    """How often each running service's health check is probed."""
    liveness_failures: int = 3
    """Consecutive failed probes after which a service counts as hung and is killed."""
    _watches: dict[str, _Watch] = field(default_factory=dict)

    def event(self, service: str, event: str, **details: Any) -> None:
        row = {"time": time.time(), "service": service, "event": event, **details}
        logger.warning("supervisor: %s %s %s", service, event, details or "")
        self.events_path.parent.mkdir(parents=True, exist_ok=True)
        with self.events_path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")

    def check(self, process: ManagedProcess) -> None:
        """One supervision pass over ``process``: restart it when it died, kill it when it hangs."""
        watch = self._watches.setdefault(process.name, _Watch())
        now = time.monotonic()
        if watch.restart_at is not None:
            if now >= watch.restart_at:
                watch.restart_at = None
                process.restart()
                watch.recovering, watch.unhealthy = True, 0
                self.event(process.name, "restarted", port=process.grpc_port, restarts=watch.restarts)
            return
        if not process.running:
            self._schedule(process, watch, process.process.returncode if process.process else None)
            return
        if now - watch.checked_at < self.liveness_every_seconds or process.grpc_port is None:
            return
        watch.checked_at = now
        if serving(process.address):
            if watch.recovering:
                watch.recovering = False
                self.event(process.name, "ready", port=process.grpc_port)
            watch.unhealthy = 0
        elif not watch.recovering:  # a starting service is not probed for liveness yet
            watch.unhealthy += 1
            if watch.unhealthy >= self.liveness_failures:
                self.event(process.name, "hung", failed_probes=watch.unhealthy)
                process.kill()

    def check_redis(self, redis: Any, restart: Callable[[], Any]) -> Any:
        """Restart embedded Redis when it died (same port and data directory); returns the server."""
        watch = self._watches.setdefault("redis", _Watch())
        if redis is None or (redis.running and watch.restart_at is None):
            return redis
        if watch.restart_at is None:
            self._schedule_named("redis", watch, redis.process.returncode)
            return redis
        if time.monotonic() < watch.restart_at:
            return redis
        watch.restart_at = None
        server = restart()
        self.event("redis", "restarted", port=server.port, restarts=watch.restarts)
        self.event("redis", "ready", port=server.port)
        return server

    def _schedule(self, process: ManagedProcess, watch: _Watch, code: int | None) -> None:
        self._schedule_named(process.name, watch, code, process.log_tail)

    def _schedule_named(
        self, name: str, watch: _Watch, code: int | None, log_tail: Callable[[], str] = lambda: ""
    ) -> None:
        if watch.restarts >= self.max_restarts:
            raise RuntimeError(
                f"service {name} exited (code {code}) after {watch.restarts} restarts:\n{log_tail()}"
            )
        delay = min(self.backoff_seconds * 2**watch.restarts, self.max_backoff_seconds)
        watch.restarts += 1
        watch.restart_at = time.monotonic() + delay
        self.event(name, "exited", code=code, restart_in=delay)
