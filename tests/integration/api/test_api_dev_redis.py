"""``lecritique api serve --dev`` gives its runs a Redis user that cannot reach the API's records
(issue #37, item 6), and keeps the embedded Redis's data to its owner.

Before the fix a ``--dev`` run got the API's own Redis URL (the password-protected default user, which
sees every key): a spec's code that reached ``REDIS_URL`` could read or rewrite every tenant's records.
A real ``lecritique api serve --dev`` process, a real run; what the run got is read from
``/proc/<pid>/environ`` of its supervisor.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from lecritique.redis_connection import redis_client
from tests.helm_support import ROOT, tiny_spec_data
from tests.integration.api.api_process import alive, descendants, free_port
from tests.tiny_policies import quick_policy

pytestmark = [pytest.mark.slow(seconds=60), pytest.mark.timeout(420)]


class DevApi:
    """``lecritique api serve --dev`` on a free port, its token read from what it prints."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.port = free_port()
        self.runs = tmp_path / "runs"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LECRITIQUE_API", "REDIS_URL"))}
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT / "libs"), str(ROOT)]),
            LECRITIQUE_API_RUNS_DIR=str(self.runs),
            LECRITIQUE_API_RECONCILE_SECONDS="3600",
        )
        self.log = (tmp_path / "api.log").open("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lecritique", "api", "serve", "--dev", "--port", str(self.port), *options],
            env=env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.token = self._token()

    def _token(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.log.seek(0)
            text = self.log.read()
            if "export LECRITIQUE_API_TOKEN=" in text:
                token = text.split("export LECRITIQUE_API_TOKEN=", 1)[1].split()[0]
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200:
                        return token
            assert self.process.poll() is None, text
            time.sleep(0.2)
        raise TimeoutError("the --dev API did not start")

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=f"http://127.0.0.1:{self.port}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # uvicorn stops, then the embedded Redis
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


@pytest.fixture
def dev_api(tmp_path: Path) -> Iterator[DevApi]:
    api = DevApi(tmp_path)
    yield api
    api.stop()


def _supervisor(api_pid: int) -> tuple[int, dict[str, str]]:
    """The pid and environment of the run's supervisor (``python -m lecritique.launch.api_local.run_and_record``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for pid in descendants(api_pid):
            with contextlib.suppress(OSError):
                if b"lecritique.launch.api_local.run_and_record" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    parts = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                    if any(parts):
                        return pid, dict(part.decode().split("=", 1) for part in parts if part)
        time.sleep(0.05)
    raise AssertionError("no run supervisor below the API")


def test_a_dev_run_cannot_read_or_write_the_apis_records(dev_api: DevApi, tmp_path: Path) -> None:
    model = dev_api.runs / "models" / "dev" / "policy"  # the dev tenant's own models folder
    shutil.copytree(quick_policy(), model)
    with dev_api.client() as client:
        created = client.post(
            "/v1/experiments", json=tiny_spec_data("dev-redis", steps=50, policy_path=model)
        )
        assert created.status_code == 201, created.text
        experiment = created.json()["id"]
        supervisor, environment = _supervisor(dev_api.process.pid)
        run = redis_client(environment["REDIS_URL"])
        record = f"lecritique:api:experiment:{experiment}"
        with pytest.raises(redis.exceptions.NoPermissionError):
            run.get(record)
        with pytest.raises(redis.exceptions.NoPermissionError):
            run.set(record, '{"tenant": "dev", "status": "succeeded"}')
        with pytest.raises(redis.exceptions.NoPermissionError):
            run.execute_command("CONFIG", "GET", "requirepass")
        assert run.set(f"lecritique:{experiment}:probe", "the run's own keys") is True
        assert client.get(f"/v1/experiments/{experiment}").json()["status"] == "running"
        client.delete(f"/v1/experiments/{experiment}")
        deadline = time.monotonic() + 120
        while alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.5)
            client.get(f"/v1/experiments/{experiment}")
    data = dev_api.runs / ".api-redis"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data.iterdir()}
    assert "appendonly.aof" in modes and set(modes.values()) == {0o600}, modes


def test_a_dev_run_is_its_own_redis_user_and_reaches_no_other_experiment(
    dev_api: DevApi, tmp_path: Path
) -> None:
    """Issue #46, item 5: every ``--dev`` run shared the ``experiments`` user, so one run listed every
    key (``SCAN``, ``RANDOMKEY``), forged another experiment's metrics and status, and grew Redis by
    256 MiB with one ``SETRANGE``; one ``"not json"`` row made GET, list and metrics return 500. Now
    the run connects as a user named after its experiment, each of those commands is refused, its own
    malformed row is skipped and counted, and its user is gone once it is cancelled."""
    model = _printed_model_folder(dev_api) / "policy"
    shutil.copytree(quick_policy(), model)
    with dev_api.client() as client:
        other = client.post("/v1/experiments", json=tiny_spec_data("dev-other", steps=50, policy_path=model))
        assert other.status_code == 201, other.text
        bob = other.json()["id"]
        assert client.delete(f"/v1/experiments/{bob}").status_code == 202
        created = client.post("/v1/experiments", json=tiny_spec_data("dev-own", steps=50, policy_path=model))
        assert created.status_code == 201, created.text
        alice = created.json()["id"]
        supervisor, environment = _supervisor_of(dev_api.process.pid, alice)
        url = environment["REDIS_URL"]
        assert url.split("://", 1)[1].startswith(f"{alice}:"), "the run's user is named after its experiment"
        run = redis_client(url)
        for command in (
            ("SCAN", "0"),
            ("SCAN", "0", "MATCH", "lecritique:api:*"),
            ("RANDOMKEY",),
            ("KEYS", "*"),
            ("RPUSH", f"lecritique:{bob}:metrics", '{"step": 999, "reward_mean": 1.0}'),
            ("HSET", f"lecritique:{bob}:status", "step", "999"),
            ("SETRANGE", f"lecritique:{alice}:big", "268435455", "x"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                run.execute_command(*command)
        assert client.get(f"/v1/experiments/{bob}").json()["step"] is None
        run.rpush(f"lecritique:{alice}:metrics", "not json")  # its own series: allowed, and harmless
        view = client.get(f"/v1/experiments/{alice}")
        assert view.status_code == 200, view.text
        assert client.get("/v1/experiments").status_code == 200
        metrics = client.get(f"/v1/experiments/{alice}/metrics")
        assert metrics.status_code == 200 and metrics.json()["skipped_rows"] >= 1, metrics.text
        client.delete(f"/v1/experiments/{alice}")
        deadline = time.monotonic() + 120
        while client.get(f"/v1/experiments/{alice}").json()["status"] != "cancelled":
            assert time.monotonic() < deadline, "the run was not cancelled"
            time.sleep(0.5)
        with pytest.raises((redis.exceptions.AuthenticationError, redis.exceptions.ConnectionError)):
            redis_client(url).ping()
        while alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.5)


def _printed_model_folder(api: DevApi) -> Path:
    """The first folder ``serve --dev`` prints for the dev tenant's models (its own, created)."""
    api.log.seek(0)
    line = next(line for line in api.log.read().splitlines() if line.startswith("model paths of tenant"))
    return Path(line.split("may lie under: ", 1)[1].split(",")[0].split(" (")[0])


def _supervisor_of(api_pid: int, experiment: str) -> tuple[int, dict[str, str]]:
    """The pid and environment of one experiment's run supervisor."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for pid in descendants(api_pid):
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
                if (
                    b"lecritique.launch.api_local.run_and_record" in command
                    and experiment.encode() in command
                ):
                    parts = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                    if any(parts):
                        return pid, dict(part.decode().split("=", 1) for part in parts if part)
        time.sleep(0.05)
    raise AssertionError(f"no run supervisor of {experiment} below the API")
