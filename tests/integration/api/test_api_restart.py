"""Restarting the API process (crash or graceful) loses nothing: records, tenants, idempotency keys,
and the ability to finish or cancel what the previous process launched. Real uvicorn processes,
a real redis-server, the kubernetes launcher talking to a recording HTTP endpoint via a kubeconfig."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from lecritique.tenancy.tokens import hash_token
from tests.helm_support import NAMESPACE, launcher_defaults, spec_data
from tests.integration.api.api_process import ApiProcess
from tests.integration.api.kubernetes_recorder import RecordingApiServer

ALICE, BOB = "alice-restart-token", "bob-restart-token"


def test_api_restarts_keep_every_record(
    tmp_path: Path, redis_db: Any, embedded_redis: Any, recorder: RecordingApiServer
) -> None:
    defaults = tmp_path / "launcher-defaults.json"
    defaults.write_text(json.dumps(launcher_defaults()))
    settings = {
        "LECRITIQUE_API_REDIS_URL": embedded_redis.url,
        "LECRITIQUE_API_LAUNCHER": "kubernetes",
        "LECRITIQUE_API_LAUNCHER_DEFAULTS": str(defaults),
        "LECRITIQUE_API_TOKENS": json.dumps({"alice": hash_token(ALICE), "bob": hash_token(BOB)}),
        "LECRITIQUE_API_RECONCILE_SECONDS": "3600",
        "LECRITIQUE_API_TENANT_POLICIES": json.dumps({"*": {"model_roots": ["/weights/models"]}}),
        "KUBECONFIG": str(recorder.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)),
    }
    first = ApiProcess(settings, tmp_path / "api-1.log").start()
    try:
        with first.client(ALICE) as alice, first.client(BOB) as bob:
            created = alice.post("/v1/experiments", json=spec_data(), headers={"Idempotency-Key": "k1"})
            assert created.status_code == 201, created.text
            kept = bob.post("/v1/experiments", json=spec_data(name="bobs-run")).json()
            before = {e["id"]: e for e in alice.get("/v1/experiments").json()["experiments"]}
    finally:
        first.stop(signal.SIGKILL)  # a crash: no shutdown code runs
    experiment = created.json()["id"]
    posts = recorder.count("POST")

    second = ApiProcess(settings, tmp_path / "api-2.log", port=first.port).start()
    try:
        with second.client(ALICE) as alice, second.client(BOB) as bob:
            after = {e["id"]: e for e in alice.get("/v1/experiments").json()["experiments"]}
            assert after == before
            assert bob.get(f"/v1/experiments/{kept['id']}").json()["name"] == "bobs-run"
            assert alice.get(f"/v1/experiments/{kept['id']}").status_code == 404
            replay = alice.post("/v1/experiments", json=spec_data(), headers={"Idempotency-Key": "k1"})
            assert replay.status_code == 201 and replay.json()["id"] == experiment
            assert replay.headers["Idempotent-Replayed"] == "true" and recorder.count("POST") == posts
            # The new process drives the old process's experiments to the end.
            recorder.finish_job(f"{experiment}-orchestrator", "Complete")
            assert alice.get(f"/v1/experiments/{experiment}").json()["status"] == "succeeded"
    finally:
        second.stop(signal.SIGTERM)

    third = ApiProcess(settings, tmp_path / "api-3.log", port=first.port).start()
    try:
        with third.client(ALICE) as alice, third.client(BOB) as bob:
            assert alice.get(f"/v1/experiments/{experiment}").json()["status"] == "succeeded"
            cancelled = bob.delete(f"/v1/experiments/{kept['id']}")
            assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
            labels = {o["metadata"]["labels"]["lecritique.dev/experiment"] for o in recorder.objects.values()}
            assert kept["id"] not in labels
    finally:
        third.stop()
