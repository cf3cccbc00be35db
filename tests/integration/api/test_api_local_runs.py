"""The local launcher: each experiment is a real ``lecritique run`` under a supervisor process.

* The supervisor records how a command ended and turns SIGTERM into SIGINT for it (fast).
* A submitted experiment really runs; the API process is killed and restarted while it runs; the
  new API process sees it running, DELETE stops it and every process it started (slow).
* The full lifecycle: submit a tiny sudoku-mini experiment, it succeeds, GET shows its step and
  versions and /metrics its series (slow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from lecritique.client import LecritiqueClient
from lecritique.launch import redis_acl
from lecritique.redis_connection import redis_client, start_embedded_redis
from tests.helm_support import ROOT, redis_user_url, tiny_spec_data
from tests.integration.api.api_process import ApiProcess, alive, descendants, local_api_settings
from tests.tiny_policies import quick_policy

TOKEN = "local-runs-token"


def _supervise(tmp_path: Path, code: str) -> tuple[subprocess.Popen[bytes], Path]:
    result = tmp_path / "result.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "libs"), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lecritique.launch.api_local.run_and_record",
            "--result",
            str(result),
            "--",
            sys.executable,
            "-c",
            code,
        ],
        cwd=str(ROOT),
        start_new_session=True,
        env=env,
    )
    return process, result


def test_supervisor_records_the_exit_code(tmp_path: Path) -> None:
    process, result = _supervise(tmp_path, "import sys; sys.exit(3)")
    assert process.wait(timeout=60) == 3
    assert json.loads(result.read_text()) == {"returncode": 3, "cancelled": False}


def test_supervisor_turns_sigterm_into_one_ctrl_c_for_the_run(tmp_path: Path) -> None:
    """The run gets exactly one SIGINT however often the API asks: a second one would interrupt
    `lecritique run` while it stops its services."""
    marker = tmp_path / "interrupted"
    code = (
        "import pathlib, time\n"
        f"pathlib.Path({str(tmp_path / 'started')!r}).touch()\n"
        "try:\n    time.sleep(120)\n"
        "except KeyboardInterrupt:\n"
        f"    pathlib.Path({str(marker)!r}).write_text('stopping')\n"
        "    time.sleep(2)  # stopping services; another SIGINT here would raise again\n"
        f"    pathlib.Path({str(marker)!r}).write_text('stopped')\n"
        "    raise SystemExit(130)\n"
    )
    process, result = _supervise(tmp_path, code)
    _wait_for(lambda: (tmp_path / "started").exists(), 60, "the child to start", poll=0.1)
    process.send_signal(signal.SIGTERM)
    _wait_for(marker.exists, 30, "the child's first interrupt", poll=0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 130
    assert marker.read_text() == "stopped"
    assert json.loads(result.read_text()) == {"returncode": 130, "cancelled": True}


def test_kill_tree_reaches_processes_in_their_own_sessions(tmp_path: Path) -> None:
    """The cancel escalation: services started in new sessions (as `lecritique run` does) die too."""
    from lecritique.launch.api_local.process_tree import kill_tree

    grandchild_pid = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time, pathlib\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
        f"pathlib.Path({str(grandchild_pid)!r}).write_text(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    _wait_for(grandchild_pid.exists, 60, "the grandchild", poll=0.1)
    grandchild = int(grandchild_pid.read_text())
    assert alive(grandchild)
    kill_tree(parent.pid)
    parent.wait(timeout=30)
    _wait_for(lambda: not alive(grandchild), 30, "the grandchild to die", poll=0.1)


def _local_api(
    tmp_path: Path, redis_url: str, name: str, port: int | None = None, experiment_redis_url: str = ""
) -> ApiProcess:
    settings = local_api_settings(
        redis_url,
        tmp_path / "runs",
        {"tester": TOKEN},
        {"*": {"modelRoots": [str(Path(quick_policy()).resolve().parent)]}},
        experiment_redis_url=experiment_redis_url,
        cancel_grace_seconds="120",
    )
    return ApiProcess(settings, tmp_path / f"{name}.log", port=port)


def _wait_for(predicate: Any, timeout: float, what: str, poll: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_running_experiment_survives_an_api_restart_and_delete_stops_all_of_it(
    tmp_path: Path, redis_db: Any, embedded_redis: Any
) -> None:
    first = _local_api(tmp_path, embedded_redis.url, "api-1").start()
    try:
        with first.client(TOKEN) as api:
            created = api.post(
                "/v1/experiments", json=tiny_spec_data("long-run", steps=10_000, policy_path=quick_policy())
            )
            assert created.status_code == 201, created.text
            experiment = created.json()
            assert experiment["status"] == "running" and experiment["launcher"] == "local"
        handle = json.loads(redis_db.get(f"lecritique:api:experiment:{experiment['id']}"))["handle"]
        supervisor = int(handle["pid"])
        logs = Path(handle["run_dir"]) / "run" / "logs"
        # Wait until `lecritique run` has started services of its own, so that stopping them is tested.
        _wait_for(lambda: logs.is_dir() and any(logs.glob("*.log")), 300, "the run's first service", poll=0.5)
        _wait_for(
            lambda: len(descendants(supervisor)) >= 3, 120, "lecritique run and a service process", poll=0.5
        )
    finally:
        first.stop(signal.SIGKILL)
    assert alive(supervisor), "the experiment must outlive the API process"

    second = _local_api(tmp_path, embedded_redis.url, "api-2", port=first.port).start()
    try:
        with second.client(TOKEN) as api:
            assert api.get(f"/v1/experiments/{experiment['id']}").json()["status"] == "running"
            processes = descendants(supervisor) | {supervisor}
            response = api.delete(f"/v1/experiments/{experiment['id']}")
            assert response.status_code == 202 and response.json()["status"] in ("cancelling", "cancelled")
            _wait_for(
                lambda: api.get(f"/v1/experiments/{experiment['id']}").json()["status"] == "cancelled",
                180,
                "cancelled",
            )
        still_running = [pid for pid in processes if alive(pid)]
        assert still_running == [], f"processes of the cancelled run still alive: {still_running}"
        assert json.loads(Path(handle["result"]).read_text())["cancelled"] is True
    finally:
        second.stop()


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_full_lifecycle_of_a_local_experiment(tmp_path: Path) -> None:
    """With Redis ACL users as the chart sets them: the run writes as its own user, created by the API
    (issue #46, item 5; it cannot read the API's records) and deleted once the run has finished; the
    API reads and writes as ``api``."""
    steps = 3
    policy = quick_policy()
    server = start_embedded_redis(tmp_path / "redis")
    admin = server.client()
    redis_acl.create_users(admin, "api-password", "experiments-password")
    api_url = redis_user_url(server.url, redis_acl.API_USER, "api-password")
    experiments_url = redis_user_url(server.url, redis_acl.EXPERIMENTS_USER, "experiments-password")
    api_process = _local_api(tmp_path, api_url, "api", experiment_redis_url=experiments_url).start()
    try:
        with api_process.client(TOKEN) as api:
            created = api.post(
                "/v1/experiments",
                json=tiny_spec_data("sudoku-mini", steps=steps, policy_path=policy),
                headers={"Idempotency-Key": "once"},
            )
            assert created.status_code == 201, created.text
            experiment = created.json()["id"]
            listed = api.get("/v1/experiments").json()["experiments"]
            assert [e["id"] for e in listed] == [experiment]

            with LecritiqueClient(api_process.url, TOKEN) as client:
                view = client.wait(experiment, poll_seconds=2.0, timeout=360).model_dump()
            assert view["status"] == "succeeded", view.get("error")
            assert view["step"] == steps and view["policy_version"] == steps
            assert view["value_version"] is not None and view["latest_metrics"]["step"] == steps
            rows = api.get(f"/v1/experiments/{experiment}/metrics").json()["rows"]
            # Step 0: the initial policy's held-out evaluation (the spec has orchestrator.eval_every).
            assert [row["step"] for row in rows] == list(range(0, steps + 1))
            for row in rows[1:]:
                assert {
                    "reward_mean",
                    "value_explained_variance",
                    "tether_rho",
                    "policy_version",
                    "value_version",
                    "dropped_stale",
                    "seconds",
                } <= set(row)
            assert (
                api.post(
                    "/v1/experiments",
                    json=tiny_spec_data("sudoku-mini", steps=steps, policy_path=policy),
                    headers={"Idempotency-Key": "once"},
                ).json()["id"]
                == experiment
            )
        experiments = redis_client(experiments_url)
        assert experiments.llen(f"lecritique:{experiment}:metrics") == steps + 1
        with pytest.raises(redis.exceptions.NoPermissionError):
            experiments.get(f"lecritique:api:experiment:{experiment}")
        own = redis_acl.ExperimentUsers(redis_client(api_url), experiments_url).url(experiment)
        assert own.split("://", 1)[1].startswith(f"{experiment}:")
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis_client(own).ping()  # deleted with the finished experiment
    finally:
        api_process.stop()
        server.stop()
