"""``lecritique run`` supervises its services like Kubernetes: restart on exit, kill when hung."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from lecritique.launch.local.processes import ManagedProcess, child_environment
from lecritique.launch.local.restarts import Supervisor

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def service(tmp_path):
    process = ManagedProcess(
        name="health-0",
        command=[
            sys.executable,
            str(Path(__file__).with_name("health_service.py")),
            "--port",
            "0",
            "--port-file",
            str(tmp_path / "port.json"),
        ],
        log_path=tmp_path / "health.log",
        port_file=tmp_path / "port.json",
        env=child_environment(REPO),
    )
    process.start()
    process.wait_ready(60)
    yield process
    process.stop(grace=2)


def _supervise_until(
    supervisor: Supervisor, process: ManagedProcess, event: str, seconds: float = 60
) -> list[dict]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        supervisor.check(process)
        events = (
            [json.loads(line) for line in supervisor.events_path.read_text().splitlines()]
            if supervisor.events_path.exists()
            else []
        )
        if any(e["event"] == event for e in events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"no {event!r} event within {seconds} s")


def test_an_exited_service_is_restarted_on_the_same_port(service, tmp_path):
    supervisor = Supervisor(tmp_path / "supervisor.jsonl", backoff_seconds=0.2, liveness_every_seconds=0.2)
    port, pid = service.grpc_port, service.process.pid
    service.kill()
    events = _supervise_until(supervisor, service, "ready")
    assert [e["event"] for e in events] == ["exited", "restarted", "ready"]
    assert service.grpc_port == port and service.process.pid != pid and service.running


def test_a_hung_service_is_killed_and_restarted(service, tmp_path):
    supervisor = Supervisor(
        tmp_path / "supervisor.jsonl", backoff_seconds=0.2, liveness_every_seconds=0.2, liveness_failures=2
    )
    os.kill(service.process.pid, signal.SIGSTOP)
    events = _supervise_until(supervisor, service, "ready")
    assert [e["event"] for e in events] == ["hung", "exited", "restarted", "ready"]


def test_restarts_are_bounded(service, tmp_path):
    supervisor = Supervisor(tmp_path / "supervisor.jsonl", max_restarts=1, backoff_seconds=0.1)
    service.kill()
    _supervise_until(supervisor, service, "restarted")
    service.kill()
    with pytest.raises(RuntimeError, match="health-0 exited .* after 1 restarts"):
        _supervise_until(supervisor, service, "never")
