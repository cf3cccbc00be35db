"""The dashboards and alert rules against a live local run, scraped by a real Prometheus.

A tiny sudoku-mini experiment runs for real under ``LocalLauncher`` (every service a process, the
embedded redis-server, the orchestrator with a metrics port). A real Prometheus (Debian's package)
scrapes every process each second and evaluates the chart's alerting rules. The test also scrapes
every process itself while the orchestrator runs. Afterwards:

* every metric name a dashboard uses was exported (scraped by hand);
* every dashboard panel's PromQL, Grafana variables filled in, returns a non-empty result from
  Prometheus' HTTP API at a moment when the orchestrator was still up;
* every alert rule was evaluated by Prometheus without error, and names only exported metrics
  (or the critic-health gauge another change adds, ``PENDING_METRICS``).
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from lecritique.monitoring import dashboard_expressions, exposition_metric_names, promql_metric_names
from lecritique.monitoring.alerts import PENDING_METRICS, alert_rules
from lecritique.monitoring.prometheus import PrometheusServer, free_port
from tests.helm_support import ROOT, all_dashboard_metric_names, load_dashboards, tiny_spec_data
from tests.tiny_policies import quick_policy

RULES_FILE = ROOT / "helm" / "lecritique" / "alerts" / "lecritique-alerts.rules.yaml"
RATE_WINDOW = "20s"
"""What Grafana's $__rate_interval becomes: many 1-second scrapes, shorter than the run."""


def _scrape(port: int) -> set[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return exposition_metric_names(response.read().decode())
    except OSError:
        return set()


def _steps_done(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def panel_queries(experiment: str) -> list[tuple[str, str]]:
    """``(where, PromQL)`` of every dashboard panel, with the Grafana variables filled in."""
    queries = []
    for file_name, dashboard in load_dashboards().items():
        for where, expression in dashboard_expressions(dashboard):
            if not where.startswith("panel"):
                continue
            filled = (
                expression.replace("${experiment:pipe}", experiment)
                .replace("$experiment", experiment)
                .replace("$__rate_interval", RATE_WINDOW)
            )
            queries.append((f"{file_name}: {where}", filled))
    return queries


@pytest.mark.slow(seconds=90)
@pytest.mark.timeout(900)
def test_dashboards_and_alerts_against_a_live_run(tmp_path: Path, embedded_redis) -> None:  # type: ignore[no-untyped-def]
    from lecritique.config import parse_spec
    from lecritique.launch.local.launcher import LocalLauncher
    from lecritique.launch.local.processes import ManagedProcess, orchestrator_command

    experiment_id = "exp-live-metrics"
    # A small critic probe every 2 steps, so the probe's gauges (dashboard panel, alert rule) are live too.
    probe = {"critic_probe": {"every": 2, "states": 4, "continuations": 2}}
    spec = parse_spec({**tiny_spec_data(experiment_id, steps=12, policy_path=quick_policy()), **probe})
    launcher = LocalLauncher(
        spec, tmp_path / "run", redis_url=embedded_redis.url, experiment_id=experiment_id
    )
    scraped: set[str] = set()
    prometheus: PrometheusServer | None = None
    try:
        launcher.start_services(timeout=300)
        addresses = launcher.addresses()
        orchestrator_metrics = free_port()
        targets = {
            process.name: process.metrics_port for process in launcher.services if process.metrics_port
        }
        assert len(targets) == len(launcher.services)
        prometheus = PrometheusServer(
            tmp_path / "prometheus", {**targets, "orchestrator": orchestrator_metrics}, [RULES_FILE]
        ).start()
        # LocalLauncher.start_orchestrator does not expose the orchestrator's metrics port; the same
        # command with --metrics-port does.
        orchestrator = ManagedProcess(
            name="orchestrator",
            command=orchestrator_command(
                spec=launcher.spec_path,
                out=launcher.out_dir,
                experiment=experiment_id,
                addresses=addresses,
                metrics_port=orchestrator_metrics,
                redis_url=embedded_redis.url,
            ),
            log_path=launcher.out_dir / "logs" / "orchestrator.log",
            env=launcher.env,
        )
        orchestrator.start()
        launcher.orchestrator = orchestrator
        deadline = time.monotonic() + 480
        rounds = 0
        while orchestrator.running and time.monotonic() < deadline:
            # The orchestrator's gauges vanish when it exits right after its last step: scrape it
            # often; the services outlive it and are scraped once more at the end.
            scraped |= _scrape(orchestrator_metrics)
            if rounds % 10 == 0:
                for port in targets.values():
                    scraped |= _scrape(port)
            rounds += 1
            time.sleep(0.1)
        for port in targets.values():
            scraped |= _scrape(port)
        assert orchestrator.process is not None
        returncode = orchestrator.process.wait(timeout=120)  # it exits after its last step
        assert returncode == 0, orchestrator.log_tail()
        assert _steps_done(launcher.out_dir) >= 8, "the orchestrator exited before 8 steps"
        # The panels are queried at Prometheus' own last scrape of the live orchestrator, after its
        # last step (its gauges are marked stale once it has exited). Asked of Prometheus, not
        # guessed from the wall clock: on a loaded machine a scrape came later than the guess.
        last_alive = prometheus.query(
            'max_over_time(timestamp(up{job="orchestrator"} == 1)[30m:1s])', time.time()
        )
        assert last_alive, "Prometheus never scraped the orchestrator"
        live_at = float(last_alive[0]["value"][1])

        used = all_dashboard_metric_names()
        missing = {name: sorted(places) for name, places in used.items() if name not in scraped}
        assert not missing, f"dashboard metrics no process exported: {missing}"

        empty, failed = [], []
        for where, query in panel_queries(experiment_id):
            try:
                if not prometheus.query(query, live_at):
                    empty.append(f"{where}: {query}")
            except ValueError as error:
                failed.append(f"{where}: {error}")
        assert not failed, "panel queries Prometheus rejected:\n" + "\n".join(failed)
        assert not empty, "panel queries with an empty result:\n" + "\n".join(empty)

        evaluated = {rule["name"]: rule for rule in prometheus.rules()}
        assert set(evaluated) == {rule.name for rule in alert_rules()}
        for name, rule in evaluated.items():
            assert rule["health"] == "ok" and not rule.get("lastError"), (name, rule.get("lastError"))
        for rule in alert_rules():
            names = promql_metric_names(rule.expr) - PENDING_METRICS
            if rule.name != "LecritiqueApiErrors":  # the REST API is not part of a local run
                assert names <= scraped, (rule.name, names - scraped)
        (tmp_path / "panels.json").write_text(json.dumps(panel_queries(experiment_id), indent=1))
    finally:
        if prometheus is not None:
            prometheus.stop()
        launcher.stop()
