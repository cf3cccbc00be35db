"""Attacks on the REST API, over real HTTP against a real API process (``lecritique api serve``)
with a real redis-server and the kubernetes launcher talking to a recording Kubernetes endpoint.

Each test is one finding of the security review: it failed on the API before the fix (accepted
with 201, answered 500, echoed 10 MB, or answered 403 where 404 is due) and must keep passing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helm_support import spec_data
from tests.integration.api.api_process import ApiProcess
from tests.integration.api.conftest import kubernetes_api_settings
from tests.integration.api.kubernetes_recorder import RecordingApiServer

ALICE, BOB = "alice-security-token", "bob-security-token"
POLICIES = {
    "*": {
        "modelRoots": ["/weights/models/shared"],
        "maxRunningExperiments": 2,
        "maxReplicas": 4,
        "maxSteps": 1000,
        "maxGpus": 4,
    },
    "alice": {"secrets": ["shared-llm-key"], "llmEndpoints": ["https://llm.example.com/v1"]},
}
MODEL = "/weights/models/shared/policy"
MAX_BODY = 262_144


def api_settings(
    tmp_path: Path, redis_url: str, recorder: RecordingApiServer, **extra: str
) -> dict[str, str]:
    """LECRITIQUE_API_* settings of an API process using the kubernetes launcher against ``recorder``
    (this module's, through the ``api`` fixture; other modules start their own)."""
    tokens = {"alice": ALICE, "bob": BOB}
    extra = {"LECRITIQUE_API_MAX_BODY_BYTES": str(MAX_BODY), **extra}
    return kubernetes_api_settings(tmp_path, redis_url, recorder, tokens, POLICIES, **extra)


@pytest.fixture
def alice(api: ApiProcess, redis_db: Any) -> Iterator[httpx.Client]:
    """Alice's client; Redis is emptied before each test (``redis_db``)."""
    with api.client(ALICE) as client:
        yield client


def _spec(**sections: Any) -> dict[str, Any]:
    return spec_data(**{"policy": {"path": MODEL}, **sections})


def _frozen(**llm: Any) -> dict[str, Any]:
    llm = {"kind": "openai", "base_url": "https://llm.example.com/v1", "model": "judge", **llm}
    return _spec(critic={"kind": "frozen_llm", "llm": llm}, estimator={"name": "lvrl"})


def _fields(response: httpx.Response) -> dict[str, str]:
    return {item["field"]: item["message"] for item in response.json()["detail"]}


@pytest.mark.parametrize(
    ("llm", "field"),
    [
        ({"api_key_env": "JUDGE_KEY", "api_key_secret": "bob-llm-key"}, "critic.llm.api_key_secret"),
        (
            {"api_key_env": "JUDGE_KEY", "api_key_secret": "lecritique-redis-auth"},
            "critic.llm.api_key_secret",
        ),
        ({"api_key_env": "REDIS_URL", "api_key_secret": "alice-llm-key"}, "critic.llm.api_key_env"),
        ({"api_key_env": "LECRITIQUE_API_TOKENS"}, "critic.llm.api_key_env"),
        ({"api_key_env": "LD_PRELOAD"}, "critic.llm.api_key_env"),
        ({"base_url": "https://collector.example.net/v1"}, "critic.llm.base_url"),
        ({"base_url": "https://llm.example.com.collector.example.net/v1"}, "critic.llm.base_url"),
        ({"base_url": "https://user@llm.example.com/v1"}, "critic.llm.base_url"),
        ({"base_url": "https://llm.example.com/v1/%2e%2e/admin"}, "critic.llm.base_url"),
        ({"base_url": "https://llm.example.com/v1/..%2fadmin"}, "critic.llm.base_url"),
        ({"base_url": "https://llm.example.com/v1%2f..%2fadmin"}, "critic.llm.base_url"),
    ],
)
def test_secrets_variables_and_endpoints_outside_the_tenants_policy_are_refused(
    alice: httpx.Client, module_recorder: RecordingApiServer, llm: dict[str, Any], field: str
) -> None:
    posts = module_recorder.count("POST")
    response = alice.post("/v1/experiments", json=_frozen(**llm))
    assert response.status_code == 403, response.text
    assert field in _fields(response)
    assert module_recorder.count("POST") == posts, "nothing was created"


@pytest.mark.parametrize(
    "llm",
    [
        {"api_key_env": "JUDGE_KEY", "api_key_secret": "alice-llm-key"},  # the tenant's own prefix
        {"api_key_env": "JUDGE_KEY", "api_key_secret": "shared-llm-key"},
    ],  # allowed by its policy
)
def test_what_the_policy_allows_is_accepted(alice: httpx.Client, llm: dict[str, Any]) -> None:
    assert alice.post("/v1/experiments", json=_frozen(**llm)).status_code == 201


@pytest.mark.parametrize(
    "base_url",
    ["https://LLM.example.com/v1", "https://llm.example.com:443/v1/", "https://llm.example.com/v1/./chat"],
)
def test_base_urls_are_compared_once_normalised(alice: httpx.Client, base_url: str) -> None:
    assert alice.post("/v1/experiments", json=_frozen(base_url=base_url)).status_code == 201


def test_endpoints_are_per_tenant(api: ApiProcess, redis_db: Any) -> None:
    with api.client(BOB) as bob:
        response = bob.post("/v1/experiments", json=_frozen())
    assert response.status_code == 403 and "critic.llm.base_url" in _fields(response)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/etc", 403),
        ("/weights/models/bob/policy", 403),
        ("/weights/models/shared-other/policy", 403),
        ("/weights/models/alice/../../../etc", 422),
        ("relative/model", 403),
        ("/weights/models/alice/policy", 201),
        ("/weights/models/shared/policy", 201),
    ],
)
def test_model_paths_must_lie_under_the_tenants_model_roots(
    alice: httpx.Client, path: str, status: int
) -> None:
    response = alice.post("/v1/experiments", json=_spec(policy={"path": path}))
    assert response.status_code == status, response.text
    if status != 201:
        assert "policy.path" in _fields(response)


def test_a_generative_critic_model_path_is_checked_too(alice: httpx.Client) -> None:
    spec = _spec(critic={"kind": "generative", "model_path": "/etc/ssl"}, estimator={"name": "value"})
    response = alice.post("/v1/experiments", json=spec)
    assert response.status_code == 403 and "critic.model_path" in _fields(response)


@pytest.mark.parametrize(
    ("sections", "field", "limit"),
    [
        ({"rollout": {"replicas": 5}}, "rollout.replicas", "4"),
        ({"critic": {"kind": "discriminative", "evaluator_replicas": 9}}, "critic.evaluator_replicas", "4"),
        (
            {"placement": {"environment_verifier": {"replicas": 16}}},
            "placement.environment_verifier.replicas",
            "4",
        ),
        ({"critic": {"kind": "discriminative", "processes": 5}}, "critic.processes", "4"),
        ({"orchestrator": {"steps": 1001}}, "orchestrator.steps", "1000"),
        (
            {"policy_trainer": {"processes": 2}, "rollout": {"replicas": 3}},
            "placement",
            "4",
        ),  # 2 + 3 + 1 + 1 GPUs
    ],
)
def test_quotas_are_422_naming_the_field_and_the_limit(
    alice: httpx.Client, sections: dict[str, Any], field: str, limit: str
) -> None:
    response = alice.post("/v1/experiments", json=_spec(**sections))
    assert response.status_code == 422, response.text
    assert limit in _fields(response)[field]


def test_running_experiments_quota_is_429_until_one_finishes(alice: httpx.Client) -> None:
    first = alice.post("/v1/experiments", json=_spec()).json()["id"]
    assert alice.post("/v1/experiments", json=_spec()).status_code == 201
    refused = alice.post("/v1/experiments", json=_spec())
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert "limit is 2" in _fields(refused)["experiments running"]
    assert alice.delete(f"/v1/experiments/{first}").json()["status"] == "cancelled"
    assert alice.post("/v1/experiments", json=_spec()).status_code == 201


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('"rollout": {"replicas": 1000000}', "rollout.replicas"),
        ('"policy_trainer": {"processes": 100000}', "policy_trainer.processes"),
        ('"critic": {"kind": "discriminative", "processes": 100000}', "critic.processes"),
        ('"orchestrator": {"steps": 1e30}', "orchestrator.steps"),
        ('"orchestrator": {"steps": 1000000000000000000000000000000}', "orchestrator.steps"),
        ('"rollout": {"sampling": {"max_tokens": 1000000000000}}', "rollout.sampling.max_tokens"),
        ('"critic": {"kind": "discriminative", "optimizer": {"lr": 1e999}}', "critic.optimizer.lr"),
        ('"critic": {"kind": "discriminative", "optimizer": {"lr": Infinity}}', "body"),
        ('"critic": {"kind": "discriminative", "optimizer": {"lr": NaN}}', "body"),
        ('"seed": -1', "seed"),
    ],
)
def test_numbers_have_upper_bounds_and_floats_are_finite(alice: httpx.Client, raw: str, field: str) -> None:
    base = json.dumps(_spec())[:-1]
    response = alice.post(
        "/v1/experiments", content=f"{base}, {raw}}}", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert field in _fields(response), response.text


@pytest.mark.parametrize("name", ["sudoku\n", "sudoku-mini\n", "a" * 51, "-x"])
def test_names_are_whole_dns_labels(alice: httpx.Client, name: str) -> None:
    response = alice.post("/v1/experiments", json=_spec(name=name))
    assert response.status_code == 422 and "name" in _fields(response)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 1000 + b"]" * 1000,
        b'{"a":' * 1000 + b"1" + b"}" * 1000,
        b"\xff\xfe{}",
        b"",
        b"   ",
        b"{not json",
        b"1" * 5000,
        b'{"name": "x"' + b", " * 10,
    ],
)
def test_every_malformed_body_is_422(alice: httpx.Client, body: bytes) -> None:
    response = alice.post("/v1/experiments", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert "body" in _fields(response) or "spec" in _fields(response)


def test_bodies_over_the_limit_are_413_declared_or_streamed(alice: httpx.Client) -> None:
    big = json.dumps(_spec(name="x" * (MAX_BODY + 10))).encode()
    assert (
        alice.post("/v1/experiments", content=big, headers={"Content-Type": "application/json"}).status_code
        == 413
    )

    def chunks() -> Iterator[bytes]:
        for _ in range(64):
            yield b" " * 16_384  # 1 MiB in all, without a Content-Length

    assert (
        alice.post(
            "/v1/experiments", content=chunks(), headers={"Content-Type": "application/json"}
        ).status_code
        == 413
    )


def test_error_messages_do_not_echo_large_input(alice: httpx.Client) -> None:
    name = "N" * 120_000
    response = alice.post("/v1/experiments", json=_spec(name=name, kind="y" * 100_000))
    assert response.status_code == 422 and len(response.content) < 5_000
    many = alice.post("/v1/experiments", json={**_spec(), **{f"k{i}": i for i in range(5_000)}})
    assert many.status_code == 422 and len(many.json()["detail"]) <= 51 and len(many.content) < 20_000


@pytest.mark.parametrize(
    "query",
    [
        "/v1/experiments?offset=9223372036854775807",
        "/v1/experiments?offset=-1",
        "/v1/experiments?limit=1000000",
        "/v1/experiments?limit=0",
        "/v1/experiments/exp-0000000000/metrics?since_step=9223372036854775807",
    ],
)
def test_pagination_and_query_numbers_are_bounded(alice: httpx.Client, query: str) -> None:
    response = alice.get(query)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] in ("offset", "limit", "since_step")


def test_another_tenants_experiment_is_indistinguishable_from_a_missing_one(
    api: ApiProcess, alice: httpx.Client
) -> None:
    with api.client(BOB) as bob:
        theirs = bob.post("/v1/experiments", json=_spec()).json()["id"]
    for method, suffix in (("GET", ""), ("GET", "/metrics"), ("DELETE", "")):
        other = alice.request(method, f"/v1/experiments/{theirs}{suffix}")
        missing = alice.request(method, f"/v1/experiments/exp-ffffffffff{suffix}")
        assert other.status_code == missing.status_code == 404
        assert other.json() == missing.json()
        assert alice.request(method, f"/v1/experiments/{'x' * 2000}{suffix}").status_code == 404
