"""REST API behaviour (FastAPI app in process) on a real redis-server, with the kubernetes launcher
talking to a recording HTTP endpoint: auth, 422s naming fields, idempotency, tenants, status."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from lecritique.tenancy.tokens import hash_token
from tests.helm_support import spec_data
from tests.integration.api.conftest import ALICE, BOB, in_process_app
from tests.integration.api.kubernetes_recorder import RecordingApiServer


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _submit(api: TestClient, token: str = ALICE, body: Any = None, key: str | None = None) -> Any:
    headers = _auth(token) | ({"Idempotency-Key": key} if key else {})
    return api.post("/v1/experiments", json=spec_data() if body is None else body, headers=headers)


def test_health_metrics_and_openapi_need_no_token(api: TestClient) -> None:
    assert api.get("/healthz").text == "ok"
    assert api.get("/readyz").status_code == 200
    paths = api.get("/openapi.json").json()["paths"]
    assert {
        "/v1/experiments",
        "/v1/experiments/{experiment_id}",
        "/v1/experiments/{experiment_id}/metrics",
        "/healthz",
    } <= set(paths)
    assert set(paths["/v1/experiments/{experiment_id}"]) == {"get", "delete"}
    assert "swagger" in api.get("/docs").text.lower()
    api.get("/v1/experiments")
    assert (
        'lecritique_api_requests_total{code="401",method="GET",route="/v1/experiments"}'
        in api.get("/metrics").text
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {ALICE}"},
        {"Authorization": ALICE},
    ],
)
def test_requests_without_a_valid_bearer_token_get_401(
    api: TestClient, recorder: RecordingApiServer, headers: dict[str, str]
) -> None:
    for method, path in (
        ("post", "/v1/experiments"),
        ("get", "/v1/experiments"),
        ("get", "/v1/experiments/exp-0000000000"),
        ("get", "/v1/experiments/exp-0000000000/metrics"),
        ("delete", "/v1/experiments/exp-0000000000"),
    ):
        response = api.request(method, path, headers=headers, json=spec_data() if method == "post" else None)
        assert response.status_code == 401, (method, path)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert recorder.calls == []


def test_submit_launches_and_returns_201_with_id_and_status(
    api: TestClient, recorder: RecordingApiServer
) -> None:
    response = _submit(api)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "running" and body["name"] == "sudoku-mini" and body["tenant"] == "alice"
    assert body["id"].startswith("exp-") and len(body["id"]) == 14
    assert response.headers["Location"] == f"/v1/experiments/{body['id']}"
    created = [call[3] for call in recorder.calls if call[0] == "POST"]
    assert {obj["metadata"]["labels"]["lecritique.dev/experiment"] for obj in created} == {body["id"]}
    assert {obj["kind"] for obj in created} == {
        "ConfigMap",
        "Service",
        "Deployment",
        "StatefulSet",
        "Job",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Secret",  # the password of the experiment's own Redis user (issue #46, item 5)
    }


def test_a_marginal_critic_budget_is_accepted_with_its_warning_on_the_record(api: TestClient) -> None:
    # 64 new trajectories a step, max_reuse 2, 32 per update: 4 updates on average, 3 guaranteed.
    marginal = spec_data(
        rollout={"tasks_per_step": 16, "group_size": 4},
        critic={"kind": "discriminative", "context": "reference", "updates_per_step": 4, "batch_size": 32},
    )
    response = _submit(api, body=marginal)
    assert response.status_code == 201, response.text
    warnings = response.json()["warnings"]
    assert len(warnings) == 1 and "critic.updates_per_step = 4 is marginal" in warnings[0]
    again = api.get(f"/v1/experiments/{response.json()['id']}", headers=_auth(ALICE)).json()
    assert again["warnings"] == warnings
    assert _submit(api).json()["warnings"] == []


def test_submit_returns_every_warning_of_the_spec_the_same_as_the_other_callers(api: TestClient) -> None:
    """Issue 40: warnings that are not about the critic budget reach an API submit too, as
    config.findings lists them for ``lecritique run``, ``lecritique study`` and the orchestrator."""
    from lecritique.config import parse_spec
    from lecritique.config.findings import warning_texts

    body = spec_data(orchestrator={"steps": 5, "eval_every": 10})
    response = _submit(api, body=body)
    assert response.status_code == 201, response.text
    warnings = response.json()["warnings"]
    assert warnings == warning_texts(parse_spec(body))
    assert any(w.startswith("orchestrator.eval_every = 10 > orchestrator.steps = 5") for w in warnings)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            spec_data(critic={"kind": "discriminative", "replay": {"capcity": 3}}),
            "critic.replay.capcity",
            "unknown field",
        ),
        (spec_data(rollout={"group_size": "four"}), "rollout.group_size", "integer"),
        ({k: v for k, v in spec_data().items() if k != "environment"}, "environment", "Field required"),
        (spec_data(name="Not A DNS Name"), "name", "lowercase"),
        (
            spec_data(placement={"rollout": {"resources": {"requests": {"memory": "1Ti"}}}}),
            "placement.rollout.resources.requests.memory",
            "exceeds the limit",
        ),
        (
            spec_data(placement={"rollout": {"node_selecter": {}}}),
            "placement.rollout.node_selecter",
            "unknown field",
        ),
        ([1, 2], "spec", "JSON object"),
    ],
)
def test_spec_errors_are_422_naming_the_field(
    api: TestClient, recorder: RecordingApiServer, body: Any, field: str, message: str
) -> None:
    response = _submit(api, body=body)
    assert response.status_code == 422, response.text
    details = response.json()["detail"]
    assert any(d["field"] == field and message in d["message"] for d in details), details
    assert (
        recorder.calls == [] and api.get("/v1/experiments", headers=_auth(ALICE)).json()["experiments"] == []
    )


def test_every_cluster_refusal_is_one_field_error_the_list_chart_render_prints(
    api: TestClient, recorder: RecordingApiServer
) -> None:
    """Issue 47, item 4: the kubernetes launcher refused at the first unplaceable field; the API now
    answers with every cluster finding (the list ``lecritique chart render --experiment`` prints)."""
    from lecritique.config.experiment import parse_spec
    from lecritique.launch.components import ChartDefaults
    from lecritique.launch.kubernetes.cluster_findings import ClusterFindings
    from tests.helm_support import launcher_defaults
    from tests.unit.chart.test_cluster_findings import FIELDS, UNPLACEABLE

    response = _submit(api, body=UNPLACEABLE)
    assert response.status_code == 422, response.text
    details = response.json()["detail"]
    expected = ClusterFindings(ChartDefaults.model_validate(launcher_defaults())).findings(
        parse_spec(UNPLACEABLE)
    )
    assert [d["field"] for d in details] == [f.field for f in expected], details
    assert sorted(d["field"] for d in details) == sorted(FIELDS)
    assert all(
        d["type"] == "placement_error" and f.text.endswith(d["message"])
        for d, f in zip(details, expected, strict=True)
    )
    assert recorder.calls == []


def test_every_tenant_refusal_is_one_field_error_the_list_chart_render_prints(
    redis_db: redis.Redis, embedded_redis: Any, recorder: RecordingApiServer
) -> None:
    """Issue 47, item 4: the tenant's refusals are the ``tenant`` context's findings; the API answers
    every one (403: an allow-list refuses some; each detail typed by its kind), in the order
    ``lecritique chart render --experiment --tenant`` prints them."""
    from lecritique.config.experiment import parse_spec
    from tests.unit.chart.test_tenant_findings import POLICIES, REFUSED, REFUSED_FIELDS, tenant_rules

    with TestClient(in_process_app(redis_db, embedded_redis, recorder, policies=POLICIES)) as api:
        response = _submit(api, body=REFUSED)
    assert response.status_code == 403, response.text
    details = response.json()["detail"]
    expected = tenant_rules().findings(parse_spec(REFUSED))
    assert [(d["field"], d["message"]) for d in details] == [(f.field, f.text) for f in expected]
    kinds = {"forbidden": "policy_denied", "limit": "quota_exceeded"}
    assert {(d["field"], d["type"]) for d in details} == {
        (field, kinds[kind]) for field, kind in REFUSED_FIELDS
    }
    assert recorder.calls == []


def test_a_body_that_is_not_json_is_422(api: TestClient) -> None:
    response = api.post(
        "/v1/experiments", content=b"{not json", headers=_auth(ALICE) | {"Content-Type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "body"


def test_idempotency_key_makes_retries_safe(api: TestClient, recorder: RecordingApiServer) -> None:
    first = _submit(api, key="retry-1")
    posts = recorder.count("POST")
    second = _submit(api, key="retry-1")
    assert first.status_code == second.status_code == 201
    assert second.json()["id"] == first.json()["id"] and second.headers["Idempotent-Replayed"] == "true"
    assert recorder.count("POST") == posts, "a retried POST must not launch again"
    assert len(api.get("/v1/experiments", headers=_auth(ALICE)).json()["experiments"]) == 1
    # Same key, different body: refused, nothing launched.
    changed = _submit(api, body=spec_data(seed=7), key="retry-1")
    assert changed.status_code == 422 and changed.json()["detail"][0]["field"] == "Idempotency-Key"
    # Keys are per tenant; a new key is a new experiment.
    assert _submit(api, token=BOB, key="retry-1").json()["id"] != first.json()["id"]
    assert _submit(api, key="retry-2").json()["id"] != first.json()["id"]


def test_a_rejected_body_does_not_burn_its_idempotency_key(api: TestClient) -> None:
    bad = _submit(
        api, body=spec_data(placement={"rollout": {"resources": {"requests": {"memory": "1Ti"}}}}), key="k"
    )
    assert bad.status_code == 422
    assert _submit(api, key="k").status_code == 201


def test_tenants_see_only_their_own_experiments(api: TestClient) -> None:
    """Another tenant's experiment is not found (404, like an id that does not exist): a 403 would
    tell the caller which ids exist."""
    mine = _submit(api).json()["id"]
    theirs = _submit(api, token=BOB).json()["id"]
    assert [e["id"] for e in api.get("/v1/experiments", headers=_auth(ALICE)).json()["experiments"]] == [mine]
    for method, path in (
        ("get", f"/v1/experiments/{theirs}"),
        ("get", f"/v1/experiments/{theirs}/metrics"),
        ("delete", f"/v1/experiments/{theirs}"),
    ):
        response = api.request(method, path, headers=_auth(ALICE))
        assert (
            response.status_code == 404
            and response.json()
            == api.request(method, path.replace(theirs, "exp-0000000000"), headers=_auth(ALICE)).json()
        )
    assert api.get(f"/v1/experiments/{theirs}", headers=_auth(BOB)).json()["status"] == "running"
    assert api.get("/v1/experiments/exp-ffffffffff", headers=_auth(ALICE)).status_code == 404


def test_details_and_metrics_come_from_what_the_orchestrator_writes(
    api: TestClient, redis_db: redis.Redis
) -> None:
    experiment = _submit(api).json()["id"]
    view = api.get(f"/v1/experiments/{experiment}", headers=_auth(ALICE)).json()
    assert view["step"] is None and view["latest_metrics"] is None and view["spec"]["name"] == "sudoku-mini"
    rows = [
        {
            "step": step,
            "reward_mean": 0.1 * step,
            "value_explained_variance": 0.2,
            "tether_rho": 0.5,
            "policy_version": step,
            "value_version": 2 * step,
            "dropped_stale": 0,
            "seconds": 1.5 * step,
        }
        for step in (1, 2, 3)
    ]
    for row in rows:
        redis_db.rpush(f"lecritique:{experiment}:metrics", json.dumps(row))
        redis_db.hset(
            f"lecritique:{experiment}:status",
            mapping={"step": row["step"], "policy_version": row["policy_version"]},
        )
    view = api.get(f"/v1/experiments/{experiment}", headers=_auth(ALICE)).json()
    assert (view["step"], view["policy_version"], view["value_version"]) == (3, 3, 6)
    assert view["latest_metrics"] == rows[-1]
    series = api.get(f"/v1/experiments/{experiment}/metrics", headers=_auth(ALICE)).json()
    assert series == {"experiment_id": experiment, "rows": rows, "skipped_rows": 0}
    later = api.get(
        f"/v1/experiments/{experiment}/metrics", params={"since_step": 1}, headers=_auth(ALICE)
    ).json()
    assert [r["step"] for r in later["rows"]] == [2, 3]


def test_finished_jobs_finish_the_experiment_and_free_its_workloads(
    api: TestClient, recorder: RecordingApiServer
) -> None:
    done, broken = _submit(api).json()["id"], _submit(api).json()["id"]
    recorder.finish_job(f"{done}-orchestrator", "Complete")
    recorder.finish_job(
        f"{broken}-orchestrator",
        "Failed",
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    assert api.get(f"/v1/experiments/{done}", headers=_auth(ALICE)).json()["status"] == "succeeded"
    failed = api.get(f"/v1/experiments/{broken}", headers=_auth(ALICE)).json()
    assert failed["status"] == "failed" and "BackoffLimitExceeded" in failed["error"]
    for experiment in (done, broken):
        left = [
            o["kind"]
            for o in recorder.objects.values()
            if o["metadata"]["labels"]["lecritique.dev/experiment"] == experiment
        ]
        assert left == ["Job"], "a finished experiment keeps only its Job (for logs)"


def test_delete_cancels_and_tears_down_its_workloads(api: TestClient, recorder: RecordingApiServer) -> None:
    experiment = _submit(api).json()["id"]
    other = _submit(api).json()["id"]
    response = api.delete(f"/v1/experiments/{experiment}", headers=_auth(ALICE))
    assert response.status_code == 202 and response.json()["status"] == "cancelled"
    labels = [o["metadata"]["labels"]["lecritique.dev/experiment"] for o in recorder.objects.values()]
    assert experiment not in labels and other in labels
    again = api.delete(f"/v1/experiments/{experiment}", headers=_auth(ALICE))
    assert again.status_code == 202 and again.json()["status"] == "cancelled"
    assert api.get(f"/v1/experiments/{experiment}", headers=_auth(ALICE)).json()["status"] == "cancelled"


def test_a_failed_launch_is_recorded_not_lost(api: TestClient, recorder: RecordingApiServer) -> None:
    recorder.http.RequestHandlerClass.do_POST = lambda self: self._reply(
        403, {"kind": "Status", "apiVersion": "v1", "code": 403, "message": "quota exceeded"}
    )  # type: ignore[attr-defined]
    response = _submit(api)
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "failed" and "launch failed" in body["error"]
    assert api.get(f"/v1/experiments/{body['id']}", headers=_auth(ALICE)).json()["status"] == "failed"


def test_token_file_changes_are_picked_up(
    redis_db: redis.Redis, embedded_redis: Any, recorder: RecordingApiServer, tmp_path: Path
) -> None:
    """A rotated Secret (the mounted file changes) takes effect without restarting the API."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"carol": hash_token("carol-token")}))
    with TestClient(in_process_app(redis_db, embedded_redis, recorder, tokens_file=tokens)) as api:
        assert api.get("/v1/experiments", headers=_auth("carol-token")).status_code == 200
        assert api.get("/v1/experiments", headers=_auth("dave-token")).status_code == 401
        tokens.write_text(json.dumps({"dave": hash_token("dave-token")}))
        os.utime(tokens, (time.time() + 10, time.time() + 10))
        deadline = time.monotonic() + 15  # the registry re-reads at most every 5 s
        while (
            api.get("/v1/experiments", headers=_auth("dave-token")).status_code != 200
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        assert api.get("/v1/experiments", headers=_auth("dave-token")).status_code == 200
        assert api.get("/v1/experiments", headers=_auth("carol-token")).status_code == 401


def test_plain_tokens_in_the_configuration_are_refused(tmp_path: Path) -> None:
    from services.api.auth import TokenRegistry

    with pytest.raises(ValueError, match="tokens.alice"):
        TokenRegistry({"alice": "alice-token"})
    bad_file = tmp_path / "tokens.json"
    bad_file.write_text(json.dumps({"Alice!": hash_token("x")}))
    with pytest.raises(ValueError, match="tenant name"):
        TokenRegistry(path=bad_file)
