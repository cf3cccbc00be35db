"""An MLflow tracking server an operator allows one tenant works end to end through the REST API.

A real MLflow tracking server (``mlflow server``, SQLite backend, proxied artifacts) and a real
``lecritique api serve`` (local launcher) whose tenant policy lists that server's base URL in
``trackerEndpoints``: the tenant's two-step experiment names the server as its MLflow
``tracking_uri``, succeeds, and the run read back from the server carries every metric the API
reports, step by step, and the report as artifacts. The same spec naming the same host on another
port is refused by the same API with 403 naming the field: the allow-list is exact, not a host.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lecritique.client import LecritiqueClient
from lecritique.tracking import scalar_metrics
from tests.integration.api.api_process import ApiProcess, free_port, local_api_settings
from tests.tiny_policies import quick_policy

TOKEN = "research-mlflow-token"
EXPERIMENT = "research/mlflow-server"
"""Under the tenant's prefix: on a shared server its experiments are named research/... ."""


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    """``mlflow server`` on a free loopback port; its base URL once ``/health`` answers."""
    port = free_port()
    store = tmp_path / "mlflow-server"
    store.mkdir()
    log = (store / "server.log").open("wb")
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")  # no huey job runner
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{store / 'mlflow.db'}",
            "--artifacts-destination",
            str(store / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (store / "server.log").read_text()[-4000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, (store / "server.log").read_text()[-4000:]
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the CLI and its uvicorn worker
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _spec(policy: Path, tracking_uri: str) -> dict[str, Any]:
    return {
        "name": "tenant-mlflow",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(policy)},
        "rollout": {"group_size": 2, "tasks_per_step": 4, "sampling": {"max_tokens": 8}},
        "estimator": {"name": "rloo"},
        "orchestrator": {"steps": 2, "max_off_policy_steps": 0},
        "tracking": [{"kind": "mlflow", "tracking_uri": tracking_uri, "experiment_name": EXPERIMENT}],
    }


@pytest.mark.slow(seconds=300)
@pytest.mark.timeout(900)
def test_an_allowed_mlflow_server_receives_the_experiments_metrics(
    tmp_path: Path, embedded_redis: Any, redis_db: Any, mlflow_server: str
) -> None:
    from mlflow.tracking import MlflowClient

    policy = quick_policy()
    other = f"http://127.0.0.1:{free_port()}"
    settings = local_api_settings(
        embedded_redis.url,
        tmp_path / "runs",
        {"research": TOKEN},
        {
            "*": {"modelRoots": [str(Path(policy).resolve().parent)]},
            "research": {"trackerEndpoints": [mlflow_server]},
        },
    )
    api = ApiProcess(settings, tmp_path / "api.log").start()
    try:
        with api.client(TOKEN) as research:
            refused = research.post("/v1/experiments", json=_spec(policy, other))
            assert refused.status_code == 403, refused.text
            detail = {item["field"]: item["message"] for item in refused.json()["detail"]}
            assert list(detail) == ["tracking.0.tracking_uri"], detail
            assert mlflow_server in detail["tracking.0.tracking_uri"], detail

            created = research.post("/v1/experiments", json=_spec(policy, mlflow_server))
            assert created.status_code == 201, created.text
            experiment = created.json()["id"]
            # The client's own wait (a hang guard of 6 minutes, not a speed bound).
            with LecritiqueClient(api.url, TOKEN) as client:
                view = client.wait(experiment, poll_seconds=2, timeout=360)
            assert view.status == "succeeded", view.error
            rows = research.get(f"/v1/experiments/{experiment}/metrics").json()["rows"]
    finally:
        api.stop()
    assert [row["step"] for row in rows] == [1, 2]

    client = MlflowClient(tracking_uri=mlflow_server)
    found = client.get_experiment_by_name(EXPERIMENT)
    assert found is not None, "the experiment reached the MLflow server"
    [run] = client.search_runs(
        [found.experiment_id], filter_string=f"tags.`lecritique.experiment` = '{experiment}'"
    )
    assert run.info.status == "FINISHED"
    assert run.data.params["orchestrator.steps"] == "2"
    expected = {row["step"]: scalar_metrics(row) for row in rows}
    assert "reward_mean" in expected[1] and "reward_mean" in expected[2]
    for key in set(expected[1]) | set(expected[2]):
        history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
        assert history == pytest.approx(
            {step: metrics[key] for step, metrics in expected.items() if key in metrics}
        ), key
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["report.md", "report.png"]
