"""Every metric a dashboard queries is exported by a real local run (scraped from each process's /metrics).

A tiny sudoku-mini experiment runs for real under ``LocalLauncher`` (every service a process, the
embedded redis-server, the orchestrator with a metrics port); the test scrapes every process while
the orchestrator runs and once more after, and compares the union of scraped sample names with
the names the dashboards' PromQL uses.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import pytest

from lecritique.monitoring import exposition_metric_names
from tests.helm_support import all_dashboard_metric_names, quick_policy, tiny_spec_data


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(port: int) -> set[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return exposition_metric_names(response.read().decode())
    except OSError:
        return set()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_dashboard_metrics_are_exported_by_a_local_run(tmp_path: Path, embedded_redis) -> None:  # type: ignore[no-untyped-def]
    from lecritique.config import parse_spec
    from lecritique.launch.local import LocalLauncher
    from lecritique.launch.processes import ManagedProcess, python_command

    experiment_id = "exp-live-metrics"
    spec = parse_spec(tiny_spec_data(experiment_id, steps=12, policy_path=quick_policy()))
    launcher = LocalLauncher(spec, tmp_path / "run", redis_url=embedded_redis.url, experiment_id=experiment_id)
    scraped: set[str] = set()
    try:
        launcher.start_services(timeout=300)
        addresses = launcher.addresses()
        orchestrator_metrics = _free_port()
        # LocalLauncher.start_orchestrator does not expose the orchestrator's metrics port; the same
        # command with --metrics-port does.
        orchestrator = ManagedProcess(
            name="orchestrator",
            command=python_command(
                "lecritique", "orchestrate", "--spec", str(launcher.spec_path), "--out", str(launcher.out_dir),
                "--experiment", experiment_id, "--rollout", ",".join(addresses["rollout"]),
                "--environment", ",".join(addresses["environment"]), "--policy-trainer", ",".join(addresses["policy-trainer"]),
                "--value-evaluator", ",".join(addresses["value-evaluator"]), "--value-trainer", ",".join(addresses["value-trainer"]),
                "--redis-url", embedded_redis.url, "--metrics-port", str(orchestrator_metrics),
            ),
            log_path=launcher.out_dir / "logs" / "orchestrator.log",
            env=launcher.env,
        )
        orchestrator.start()
        launcher.orchestrator = orchestrator
        service_ports = [p.metrics_port for p in launcher.services if p.metrics_port]
        assert len(service_ports) == len(launcher.services)
        deadline = time.monotonic() + 480
        rounds = 0
        while orchestrator.running and time.monotonic() < deadline:
            # The orchestrator's gauges vanish when it exits right after its last step: scrape it
            # often; the services outlive it and are scraped once more at the end.
            scraped |= _scrape(orchestrator_metrics)
            if rounds % 10 == 0:
                for port in service_ports:
                    scraped |= _scrape(port)
            rounds += 1
            time.sleep(0.1)
        for port in service_ports:
            scraped |= _scrape(port)
        assert orchestrator.process is not None
        returncode = orchestrator.process.wait(timeout=5)
    finally:
        launcher.stop()
    used = all_dashboard_metric_names()
    missing = {name: sorted(places) for name, places in used.items() if name not in scraped}
    assert not missing, f"dashboard metrics no process exported: {missing}"
    assert returncode == 0, orchestrator.log_tail()
