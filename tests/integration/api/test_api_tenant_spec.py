"""What a tenant's spec may make the platform run, read, write or call, over real HTTP against a
real API process (``lecritique api serve``, kubernetes launcher on a recording Kubernetes endpoint).

Each attack was accepted with 201 before the tenant policy covered code, dataset paths and tracker
destinations (issue: "Multi-tenant API, second pass"); each must now be refused by default with
403 naming the field and what is allowed, and work once the operator allows it for that tenant.
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

ALICE, CAROL = "alice-spec-token", "carol-spec-token"
MLFLOW = "https://mlflow.internal.example:5000"
SHARED_TRACKER = "http://127.0.0.1:5000"
"""A tracker server shared by tenants, each under its own path (``<tracker>/carol``, ``<tracker>/bob``)."""
EGRESS = {"to": [{"ipBlock": {"cidr": "10.20.30.40/32"}}], "ports": [{"port": 5000, "protocol": "TCP"}]}
POLICIES = {
    "*": {"modelRoots": ["/weights/models/shared"]},
    "carol": {
        "verifierEntryPoints": ["tests.unit.envs.dataset_verifiers:within_one"],
        "datasetRoots": ["/data/shared"],
        "trackerEndpoints": [MLFLOW, "https://api.wandb.ai", f"{SHARED_TRACKER}/carol"],
        "trackerEgress": [EGRESS],
    },
}
MODEL = "/weights/models/shared/policy"


def api_settings(folder: Path, redis_url: str, recorder: RecordingApiServer) -> dict[str, str]:
    """The settings of this module's API process (the ``api`` fixture)."""
    tokens = {"alice": ALICE, "carol": CAROL}
    return kubernetes_api_settings(
        folder, redis_url, recorder, tokens, POLICIES, LECRITIQUE_API_DATASETS_ROOT="/data/datasets"
    )


@pytest.fixture
def alice(api: ApiProcess, redis_db: Any) -> Iterator[httpx.Client]:
    with api.client(ALICE) as client:
        yield client


@pytest.fixture
def carol(api: ApiProcess, redis_db: Any) -> Iterator[httpx.Client]:
    with api.client(CAROL) as client:
        yield client


def _dataset(path: str = "/data/datasets/alice/problems.jsonl", **fields: Any) -> dict[str, Any]:
    return {"kind": "dataset", "path": path, **fields}


def _spec(**sections: Any) -> dict[str, Any]:
    return spec_data(**{"policy": {"path": MODEL}, **sections})


def _refused(response: httpx.Response, field: str, allowed: str, status: int = 403) -> None:
    assert response.status_code == status, response.text
    fields = {item["field"]: item["message"] for item in response.json()["detail"]}
    assert field in fields, fields
    assert allowed in fields[field], fields[field]


# ---- code -------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry_point", ["timeit:timeit", "cProfile:run", "os:system", "shutil:rmtree"])
def test_python_verifier_entry_points_are_refused_by_default(
    alice: httpx.Client, module_recorder: RecordingApiServer, entry_point: str
) -> None:
    posts = module_recorder.count("POST")
    spec = _spec(environment=_dataset(verifier={"kind": "python", "entry_point": entry_point}))
    _refused(
        alice.post("/v1/experiments", json=spec),
        "environment.verifier.entry_point",
        "verifier entry points this tenant may use: []",
    )
    assert module_recorder.count("POST") == posts, "nothing was created"


def test_an_allowed_entry_point_is_exact_per_tenant(carol: httpx.Client, alice: httpx.Client) -> None:
    allowed = {"kind": "python", "entry_point": "tests.unit.envs.dataset_verifiers:within_one"}
    assert (
        carol.post(
            "/v1/experiments", json=_spec(environment=_dataset("/data/shared/p.jsonl", verifier=allowed))
        ).status_code
        == 201
    )
    near = {"kind": "python", "entry_point": "tests.unit.envs.dataset_verifiers:broken"}
    _refused(
        carol.post(
            "/v1/experiments", json=_spec(environment=_dataset("/data/shared/p.jsonl", verifier=near))
        ),
        "environment.verifier.entry_point",
        "tests.unit.envs.dataset_verifiers:within_one",
    )
    _refused(
        alice.post("/v1/experiments", json=_spec(environment=_dataset(verifier=allowed))),
        "environment.verifier.entry_point",
        "[]",
    )


# ---- paths ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../../../../etc/shadow",
        "problems.jsonl",
        "/data/datasets/bob/p.jsonl",
        "/data/datasets/alice/../bob/p.jsonl",
        "/data/datasets/alice-other/p.jsonl",
    ],
)
def test_dataset_paths_outside_the_tenants_roots_are_refused(alice: httpx.Client, path: str) -> None:
    _refused(
        alice.post("/v1/experiments", json=_spec(environment=_dataset(path))),
        "environment.path",
        "/data/datasets/alice",
    )


def test_dataset_paths_in_the_tenants_roots_are_accepted(alice: httpx.Client, carol: httpx.Client) -> None:
    assert alice.post("/v1/experiments", json=_spec(environment=_dataset())).status_code == 201
    assert (
        carol.post("/v1/experiments", json=_spec(environment=_dataset("/data/shared/p.jsonl"))).status_code
        == 201
    )
    assert (
        carol.post(
            "/v1/experiments", json=_spec(environment=_dataset("/data/datasets/carol/p.jsonl"))
        ).status_code
        == 201
    )


@pytest.mark.parametrize(
    ("tracker", "field", "allowed"),
    [
        (
            {"kind": "tensorboard", "log_dir": "/another/tenant/run"},
            "tracking.0.log_dir",
            "inside the experiment's run directory",
        ),
        (
            {"kind": "tensorboard", "log_dir": "../../other-run"},
            "tracking.0.log_dir",
            "inside the experiment's run directory",
        ),
        ({"kind": "trackio", "dir": "/root"}, "tracking.0.dir", "inside the experiment's run directory"),
        ({"kind": "trackio"}, "tracking.0.dir", "inside the experiment's run directory"),
        (
            {"kind": "wandb", "mode": "offline", "dir": "/tmp/x"},
            "tracking.0.dir",
            "inside the experiment's run directory",
        ),
        (
            {"kind": "mlflow", "tracking_uri": "file:///etc"},
            "tracking.0.tracking_uri",
            "tracker servers this tenant may use: []",
        ),
        (
            {"kind": "mlflow", "tracking_uri": "/etc"},
            "tracking.0.tracking_uri",
            "tracker servers this tenant may use: []",
        ),
    ],
)
def test_tracker_folders_outside_the_run_directory_are_refused(
    alice: httpx.Client, tracker: dict[str, Any], field: str, allowed: str
) -> None:
    _refused(alice.post("/v1/experiments", json=_spec(tracking=[tracker])), field, allowed)


def test_tracker_folders_inside_the_run_directory_are_accepted(alice: httpx.Client) -> None:
    trackers = [
        {"kind": "tensorboard"},
        {"kind": "tensorboard", "log_dir": "tb/main"},
        {"kind": "trackio", "dir": "trackio"},
        {"kind": "mlflow"},
        {"kind": "wandb", "mode": "offline"},
    ]
    assert alice.post("/v1/experiments", json=_spec(tracking=trackers)).status_code == 201


# ---- addresses --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tracker", "field"),
    [
        ({"kind": "mlflow", "tracking_uri": "http://127.0.0.1:6379"}, "tracking.0.tracking_uri"),
        ({"kind": "mlflow", "tracking_uri": "http://169.254.169.254/latest"}, "tracking.0.tracking_uri"),
        ({"kind": "mlflow", "tracking_uri": "databricks"}, "tracking.0.tracking_uri"),
        ({"kind": "wandb", "mode": "online"}, "tracking.0.mode"),
        ({"kind": "wandb"}, "tracking.0.mode"),  # None: online unless WANDB_MODE says otherwise
    ],
)
def test_tracker_servers_are_refused_by_default(
    alice: httpx.Client, tracker: dict[str, Any], field: str
) -> None:
    _refused(
        alice.post("/v1/experiments", json=_spec(tracking=[tracker])),
        field,
        "tracker servers this tenant may use: []",
    )


def test_allowed_tracker_servers_are_accepted_and_opened_in_the_network_policy(
    carol: httpx.Client, module_recorder: RecordingApiServer
) -> None:
    trackers = [
        {"kind": "mlflow", "tracking_uri": f"{MLFLOW}/", "experiment_name": "carol/sudoku"},
        {"kind": "wandb", "mode": "online", "project": "carol"},
    ]
    response = carol.post("/v1/experiments", json=_spec(tracking=trackers))
    assert response.status_code == 201, response.text
    experiment = response.json()["id"]
    policies = [
        body
        for method, path, _, body in module_recorder.calls
        if method == "POST" and path.endswith("/networkpolicies") and experiment in json.dumps(body)
    ]
    orchestrator = [
        p for p in policies if p["metadata"]["labels"].get("app.kubernetes.io/component") == "orchestrator"
    ]
    assert len(orchestrator) == 1 and EGRESS in orchestrator[0]["spec"]["egress"]
    others = [p for p in policies if p not in orchestrator]
    assert others and all(EGRESS not in p["spec"].get("egress", []) for p in others)
    _refused(
        carol.post(
            "/v1/experiments",
            json=_spec(tracking=[{"kind": "mlflow", "tracking_uri": "http://127.0.0.1:6379"}]),
        ),
        "tracking.0.tracking_uri",
        MLFLOW,
    )


def test_other_spec_paths_are_checked_too(alice: httpx.Client) -> None:
    """Fields the schema walk found besides the issue's examples: the distillation teacher (a model
    directory) and the code sandbox's importable packages."""
    teacher = {"distillation": {"teacher": "/etc", "gate": "none"}}
    _refused(
        alice.post("/v1/experiments", json=_spec(policy_trainer=teacher)),
        "policy_trainer.distillation.teacher",
        "/weights/models",
    )
    codeio = {"kind": "codeio", "sandbox": {"packages": ["numpy", "lecritique"]}}
    _refused(
        alice.post("/v1/experiments", json=_spec(environment=codeio)), "environment.sandbox.packages", "numpy"
    )


# ---- URLs are compared once normalised (issue 37, item 7) ---------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/carol/%2e%2e/bob",
        "/carol/%2E%2E/bob",
        "/carol/.%2e/bob",
        "/carol/%2e./bob",
        "/carol/..%2fbob",
        "/carol%2f..%2fbob",
        "/carol/%252e%252e/bob",
        "/carol/..%5cbob",
        "/carol/..\\bob",
        "/carol/../bob",
        "/carol/x/../../bob",
        "/carol/%00/x",
    ],
)
def test_encoded_dot_segments_and_slashes_do_not_leave_the_allowed_prefix(
    carol: httpx.Client, path: str
) -> None:
    tracker = {"kind": "mlflow", "tracking_uri": SHARED_TRACKER + path, "experiment_name": "carol/x"}
    _refused(
        carol.post("/v1/experiments", json=_spec(tracking=[tracker])),
        "tracking.0.tracking_uri",
        "tracker servers this tenant may use",
    )


@pytest.mark.parametrize(
    "uri",
    [
        f"{SHARED_TRACKER}/carol",
        f"{SHARED_TRACKER}/carol/runs",
        f"{SHARED_TRACKER}/carol/a/../b",
        "HTTP://127.0.0.1:5000/carol/x",
        "https://MLFLOW.internal.example:5000/team",
        "http://127.0.0.1:5000/%63arol/x",
    ],
)
def test_urls_under_the_allowed_prefix_once_normalised_are_accepted(carol: httpx.Client, uri: str) -> None:
    tracker = {"kind": "mlflow", "tracking_uri": uri, "experiment_name": "carol/x"}
    assert carol.post("/v1/experiments", json=_spec(tracking=[tracker])).status_code == 201


def test_default_ports_are_the_same_origin(carol: httpx.Client) -> None:
    """``https://host`` and ``https://host:443`` are one server (the allowed base names no port)."""
    spec = _spec(tracking=[{"kind": "wandb", "mode": "online", "project": "carol"}])
    assert carol.post("/v1/experiments", json=spec).status_code == 201
    for uri in ("https://api.wandb.ai:443/x", "https://API.WANDB.AI/x"):
        tracker = {"kind": "mlflow", "tracking_uri": uri, "experiment_name": "carol/x"}
        assert carol.post("/v1/experiments", json=_spec(tracking=[tracker])).status_code == 201, uri


# ---- tracker names on shared servers (issue 37, also noted) -------------------------------------
@pytest.mark.parametrize(
    ("tracker", "field"),
    [
        (
            {"kind": "mlflow", "tracking_uri": MLFLOW, "experiment_name": "bob/sudoku"},
            "tracking.0.experiment_name",
        ),
        (
            {"kind": "mlflow", "tracking_uri": MLFLOW, "experiment_name": "carol-sudoku"},
            "tracking.0.experiment_name",
        ),
        (
            {"kind": "mlflow", "tracking_uri": MLFLOW, "experiment_name": "carolx/sudoku"},
            "tracking.0.experiment_name",
        ),
        (
            {"kind": "mlflow", "tracking_uri": MLFLOW, "experiment_name": "carol/"},
            "tracking.0.experiment_name",
        ),
        ({"kind": "mlflow", "tracking_uri": MLFLOW}, "tracking.0.experiment_name"),  # unset: the spec's name
        ({"kind": "wandb", "mode": "online", "project": "bob"}, "tracking.0.project"),
        ({"kind": "wandb", "mode": "online"}, "tracking.0.project"),  # unset: "lecritique", shared by all
        ({"kind": "wandb", "mode": "online", "project": "carol-x"}, "tracking.0.project"),
        ({"kind": "wandb", "mode": "online", "project": "carol", "entity": "bob"}, "tracking.0.entity"),
        ({"kind": "wandb", "project": "carol", "group": "x", "entity": "bob-team"}, "tracking.0.entity"),
    ],
)
def test_names_on_a_shared_tracker_server_lie_under_the_tenants_prefix(
    carol: httpx.Client, tracker: dict[str, Any], field: str
) -> None:
    _refused(carol.post("/v1/experiments", json=_spec(tracking=[tracker])), field, "carol")


def test_names_in_the_run_directory_are_the_tenants_own(carol: httpx.Client, alice: httpx.Client) -> None:
    """Without a server (a file store, W&B offline) the names reach no other tenant: any is accepted."""
    local = [
        {"kind": "mlflow", "experiment_name": "bob/sudoku"},
        {"kind": "wandb", "mode": "offline", "project": "bob", "entity": "bob", "group": "bob"},
    ]
    assert alice.post("/v1/experiments", json=_spec(tracking=local)).status_code == 201
    shared = [
        {"kind": "mlflow", "tracking_uri": MLFLOW, "experiment_name": "carol/sudoku/seed-1"},
        {"kind": "wandb", "mode": "online", "project": "carol", "entity": "carol", "group": "bob-study"},
    ]
    assert carol.post("/v1/experiments", json=_spec(tracking=shared)).status_code == 201
