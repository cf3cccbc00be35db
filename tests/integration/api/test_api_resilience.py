"""The API when its Redis fails or it dies mid-request: real API processes, real redis-servers.

* Redis down: every /v1 call is 503 with Retry-After (before the fix: 500), and the API recovers
  by itself when Redis is back.
* Idempotency keys are recorded with their experiment in one Lua script. Before the fix the key
  was claimed first and the record written after; a failure in between (here: the record write
  refused by a Redis ACL, as a crash or an outage would interrupt it) left the key answering 409
  for 24 hours. Now either both are written or neither.
* An API killed while it launches leaves a ``pending`` record that the retried key replays and the
  next API process launches.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lecritique.redis_connection import EmbeddedRedis, redis_client, start_embedded_redis
from tests.helm_support import spec_data
from tests.integration.api.api_process import ApiProcess
from tests.integration.api.kubernetes_recorder import RecordingApiServer
from tests.integration.api.test_api_security import ALICE, MODEL, api_settings

SPEC = spec_data(policy={"path": MODEL})


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A redis-server of this test alone (it gets stopped, restarted and re-permissioned)."""
    server = start_embedded_redis(tmp_path / "redis")
    yield server
    server.stop()


def _calls(experiment: str) -> list[tuple[str, str, Any]]:
    return [
        ("POST", "/v1/experiments", SPEC),
        ("GET", "/v1/experiments", None),
        ("GET", f"/v1/experiments/{experiment}", None),
        ("GET", f"/v1/experiments/{experiment}/metrics", None),
        ("DELETE", f"/v1/experiments/{experiment}", None),
    ]


def test_every_v1_call_is_503_with_retry_after_while_redis_is_down(
    tmp_path: Path, own_redis: EmbeddedRedis, recorder: RecordingApiServer
) -> None:
    api = ApiProcess(api_settings(tmp_path, own_redis.url, recorder), tmp_path / "api.log").start()
    try:
        with api.client(ALICE) as alice, httpx.Client(base_url=api.url) as anonymous:
            experiment = alice.post("/v1/experiments", json=SPEC).json()["id"]
            port, data_dir = own_redis.port, own_redis.data_dir
            own_redis.stop()
            for method, path, body in _calls(experiment):
                response = alice.request(method, path, json=body)
                assert response.status_code == 503, (method, path, response.text)
                assert int(response.headers["Retry-After"]) > 0
                assert response.json()["detail"][0]["field"] == "redis"
                assert anonymous.request(method, path, json=body).status_code == 401
            assert (
                anonymous.get("/readyz").status_code == 503 and anonymous.get("/healthz").status_code == 200
            )
            restarted = start_embedded_redis(data_dir, port=port)
            try:
                assert alice.get(f"/v1/experiments/{experiment}").json()["status"] == "running"
                assert anonymous.get("/readyz").status_code == 200
            finally:
                restarted.stop()
    finally:
        api.stop()


def _acl_urls(server: EmbeddedRedis) -> tuple[str, Any]:
    """An ``admin`` user for the test and an ``api`` user for the API, which may not yet write records."""
    admin_url = f"redis://admin:admin-pw@127.0.0.1:{server.port}/0"
    setup = server.client()
    setup.execute_command("ACL", "SETUSER", "admin", "on", ">admin-pw", "~*", "+@all")
    setup.execute_command(
        "ACL",
        "SETUSER",
        "api",
        "on",
        ">api-pw",
        "~lecritique:api:idempotency:*",
        "~lecritique:api:tenant:*",
        "~lecritique:api:active",
        "~lecritique:api:running:*",
        "~lecritique:api:unused",
        "+@all",
    )
    setup.execute_command("ACL", "SETUSER", "default", "off")
    return f"redis://api:api-pw@127.0.0.1:{server.port}/0", redis_client(admin_url)


def test_a_failure_between_claiming_a_key_and_writing_the_record_does_not_burn_the_key(
    tmp_path: Path, own_redis: EmbeddedRedis, recorder: RecordingApiServer
) -> None:
    api_url, admin = _acl_urls(own_redis)
    api = ApiProcess(api_settings(tmp_path, api_url, recorder), tmp_path / "api.log").start()
    try:
        with api.client(ALICE) as alice:
            failed = alice.post("/v1/experiments", json=SPEC, headers={"Idempotency-Key": "once"})
            assert failed.status_code >= 500, failed.text
            left = admin.keys("lecritique:api:*")
            admin.execute_command("ACL", "SETUSER", "api", "~*")  # the store works again
            created = alice.post("/v1/experiments", json=SPEC, headers={"Idempotency-Key": "once"})
            assert created.status_code == 201, (
                created.text
            )  # before the fix: 409 "still in progress", for 24 h
            assert left == [], "neither the key nor any part of the record was written"
            assert failed.status_code == 503 and failed.headers["Retry-After"]
            replayed = alice.post("/v1/experiments", json=SPEC, headers={"Idempotency-Key": "once"})
            assert replayed.status_code == 201 and replayed.json()["id"] == created.json()["id"]
            assert replayed.headers["Idempotent-Replayed"] == "true"
    finally:
        api.stop()
        admin.close()


def test_an_api_killed_while_launching_leaves_a_record_that_the_key_replays_and_the_next_api_launches(
    tmp_path: Path, own_redis: EmbeddedRedis, recorder: RecordingApiServer
) -> None:
    release = threading.Event()
    original = recorder.http.RequestHandlerClass.do_POST

    def blocked_post(handler: Any) -> None:
        release.wait(60)
        original(handler)

    recorder.http.RequestHandlerClass.do_POST = blocked_post  # type: ignore[attr-defined]
    settings = api_settings(
        tmp_path,
        own_redis.url,
        recorder,
        LECRITIQUE_API_PENDING_GRACE_SECONDS="1",
        LECRITIQUE_API_RECONCILE_SECONDS="1",
    )
    first = ApiProcess(settings, tmp_path / "api-1.log").start()
    client = own_redis.client()
    try:
        submit = threading.Thread(target=lambda: _post_ignoring_errors(first, "k"), daemon=True)
        submit.start()
        deadline = time.monotonic() + 60
        while not client.keys("lecritique:api:experiment:*") and time.monotonic() < deadline:
            time.sleep(0.05)
        [key] = client.keys("lecritique:api:experiment:*")
        experiment = json.loads(client.get(key))["id"]
    finally:
        first.stop(signal.SIGKILL)  # dies while its launch waits on the Kubernetes API
    release.set()
    recorder.http.RequestHandlerClass.do_POST = original  # type: ignore[attr-defined]
    second = ApiProcess(settings, tmp_path / "api-2.log", port=first.port).start()
    try:
        with second.client(ALICE) as alice:
            replayed = alice.post("/v1/experiments", json=SPEC, headers={"Idempotency-Key": "k"})
            assert replayed.status_code == 201 and replayed.json()["id"] == experiment
            deadline = time.monotonic() + 60
            while (
                alice.get(f"/v1/experiments/{experiment}").json()["status"] != "running"
                and time.monotonic() < deadline
            ):
                time.sleep(0.5)
            assert alice.get(f"/v1/experiments/{experiment}").json()["status"] == "running"
            assert any(
                o["kind"] == "Job" and o["metadata"]["name"] == f"{experiment}-orchestrator"
                for o in recorder.objects.values()
            )
            assert len(alice.get("/v1/experiments").json()["experiments"]) == 1
    finally:
        second.stop()
        client.close()


def _post_ignoring_errors(api: ApiProcess, key: str) -> None:
    try:
        with api.client(ALICE) as alice:
            alice.post("/v1/experiments", json=SPEC, headers={"Idempotency-Key": key})
    except httpx.HTTPError:
        pass  # the API is killed while this request waits
