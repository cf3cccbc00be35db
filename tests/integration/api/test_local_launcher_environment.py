"""The local launcher gives a run only an allow-listed environment, never the API process's own.

Before the fix the run inherited ``os.environ`` of the API whole, and a spec's ``api_key_env``
could name any variable of it (a cloud credential, the API's token hashes): the key was then sent
to whatever ``base_url`` the spec named. Real API process, real supervisor process; what the run
got is read from ``/proc/<pid>/environ`` and ``/proc/<pid>/cmdline`` of the supervisor.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from tests.integration.api.api_process import ApiProcess, alive, local_api_settings
from tests.tiny_policies import quick_policy

TOKEN = "local-environment-token"
CANARY = "LECRITIQUE_TEST_CANARY"


def _spec(model: Path, key_env: str) -> dict[str, Any]:
    llm = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "judge", "api_key_env": key_env}
    return {
        "name": "env-check",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(model)},
        "estimator": {"name": "lvrl"},
        "critic": {"kind": "frozen_llm", "llm": llm},
        "orchestrator": {"steps": 1},
    }


def _read_proc(pid: int, name: str) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/{name}").read_bytes().split(b"\0") if part]


def _read_started(pid: int, name: str, seconds: float = 60.0) -> list[str]:
    """``/proc/<pid>/<name>`` once the exec that started the process has laid out its arguments.

    ``Popen`` returns when the close-on-exec pipe closes, which the kernel does before it writes
    the new image's argument and environment pointers: in that window (wide on a loaded machine)
    both files read empty although the process is alive and its environment already decided."""
    deadline = time.monotonic() + seconds
    while True:
        parts = _read_proc(pid, name)
        if parts or not alive(pid) or time.monotonic() > deadline:
            return parts
        time.sleep(0.01)


def test_a_run_gets_only_allow_listed_variables_and_the_key_its_tenant_may_use(
    tmp_path: Path, redis_db: Any, embedded_redis: Any
) -> None:
    # A real policy: the run must live until its environment is read (an empty model directory made
    # it fail at once, and a dead supervisor's /proc/<pid>/environ reads empty).
    model = tmp_path / "models" / "tester" / "policy"
    shutil.copytree(quick_policy(), model)
    experiment_url = embedded_redis.url.replace("redis://", "redis://experiments:not-a-real-password@")
    settings = {
        **local_api_settings(
            embedded_redis.url,
            tmp_path / "runs",
            {"tester": TOKEN},
            {"tester": {"llmEndpoints": ["http://127.0.0.1:9/v1"]}},
            experiment_redis_url=experiment_url,
            models_root=str(tmp_path / "models"),
            reconcile_seconds="3600",
        ),
        CANARY: "the API's own secret",
        "TESTER_LLM_KEY": "the tester's key",
        "OTHER_LLM_KEY": "someone else's key",
    }
    api = ApiProcess(settings, tmp_path / "api.log").start()
    try:
        with api.client(TOKEN) as client:
            for forbidden in ("OTHER_LLM_KEY", CANARY, "REDIS_URL", "PATH"):
                refused = client.post("/v1/experiments", json=_spec(model, forbidden))
                assert refused.status_code == 403, refused.text
                assert refused.json()["detail"][0]["field"] == "critic.llm.api_key_env"
            created = client.post("/v1/experiments", json=_spec(model, "TESTER_LLM_KEY"))
            assert created.status_code == 201, created.text
            handle = json.loads(redis_db.get(f"lecritique:api:experiment:{created.json()['id']}"))["handle"]
            pid = int(handle["pid"])
            environment = dict(item.split("=", 1) for item in _read_started(pid, "environ"))
            assert environment, "the run's supervisor exited before its environment could be read"
            command_line = _read_started(pid, "cmdline")
            client.delete(f"/v1/experiments/{created.json()['id']}")
            deadline = time.monotonic() + 120
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.5)
    finally:
        api.stop()
    assert CANARY not in environment and "OTHER_LLM_KEY" not in environment
    assert not any(name.startswith("LECRITIQUE_API_") for name in environment)
    assert environment["TESTER_LLM_KEY"] == "the tester's key"
    # The run's own Redis user, named after its experiment, at the experiments' address (issue #46, item 5).
    experiment = created.json()["id"]
    own = f"redis://{experiment}:"
    assert environment["REDIS_URL"].startswith(own), "the run uses its experiment's own Redis user"
    assert environment["REDIS_URL"].endswith(experiment_url.rpartition("@")[2])
    password = environment["REDIS_URL"][len(own) :].partition("@")[0]
    assert not any(password in part for part in command_line), "no password on a command line"


def test_the_embedded_redis_of_lecritique_run_requires_a_password(tmp_path: Path) -> None:
    import pytest
    import redis

    from lecritique.launch.local.launcher import start_locked_redis
    from lecritique.redis_connection import redis_client

    server, url = start_locked_redis(tmp_path / "redis")
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis_client(server.url).get("lecritique:exp:replay")
        assert redis_client(url).ping() is True
    finally:
        server.stop()
