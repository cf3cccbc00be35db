"""``lecritique api serve --dev`` takes the newcomer's own files (issue #41, item 2).

Before, the dev tenant's dataset paths had to lie under ``/weights/datasets/dev`` (a folder a laptop
does not have), a refusal did not say how to widen that, and a restart changed the token. Now
``--dev`` gives tenant ``dev`` a model and a dataset folder under the runs directory (created and
printed), ``--dataset-root`` / ``--model-root`` add more, a 403 names the flag in ``--dev`` and the
policy key otherwise, and the token is kept (0600) and reused. In process for the refusals, then a
real ``api serve --dev`` started twice.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import typer
from fastapi.testclient import TestClient

from lecritique.cli.api import DevRoots, dev_policies, dev_token
from lecritique.launch.api_local.launcher import LocalProcessLauncher
from lecritique.tenancy.tokens import hash_token
from services.api.app import create_app
from services.api.settings import ApiSettings
from tests.helm_support import ROOT, spec_data
from tests.integration.api.test_api_dev_redis import DevApi
from tests.tiny_policies import quick_policy

TOKEN = "dev-roots-token-0123456789"


def _dataset(path: Path | str) -> dict[str, Any]:
    return {"kind": "dataset", "path": str(path), "prompt_column": "question", "reference_column": "answer"}


def _app(redis_db: redis.Redis, embedded_redis: Any, runs: Path, *, dev: bool) -> TestClient:
    DevRoots((), ()).with_defaults(runs)
    settings = ApiSettings(
        redis_url=embedded_redis.url,
        launcher="local",
        tokens={"dev": hash_token(TOKEN)},
        tenant_policies=dev_policies("{}", DevRoots((), ())),
        # As `serve --dev` sets them: the runs folder plays the weight volume.
        models_root=str(runs / "models") if dev else "/weights/models",
        datasets_root=str(runs / "datasets") if dev else "/weights/datasets",
        runs_dir=runs,
        reconcile_seconds=3600,
        dev=dev,
    )
    launcher = LocalProcessLauncher(runs, embedded_redis.url, models_root=settings.models_root)
    return TestClient(create_app(settings, launcher=launcher, redis_client=redis_db))


def _refusal(response: httpx.Response, field: str) -> str:
    assert response.status_code == 403, response.text
    messages = {item["field"]: item["message"] for item in response.json()["detail"]}
    assert field in messages, messages
    return messages[field]


def test_dev_roots_are_created_under_the_runs_folder_and_widened_by_flags(tmp_path: Path) -> None:
    roots = DevRoots((tmp_path / "mine" / ".." / "data",), (tmp_path / "hf",)).with_defaults(
        tmp_path / "runs"
    )
    assert roots.datasets == (tmp_path / "runs" / "datasets" / "dev", tmp_path / "data")
    assert roots.models == (tmp_path / "runs" / "models" / "dev", tmp_path / "hf")
    assert (tmp_path / "runs" / "datasets" / "dev").is_dir() and (
        tmp_path / "runs" / "models" / "dev"
    ).is_dir()
    earlier = json.dumps({"*": {"maxSteps": 10}, "dev": {"dataset_roots": ["/srv/data"], "maxGpus": 0}})
    # The default folders are the tenant's own (<runs>/models/dev is <models_root>/<tenant>): only the flags' are added.
    flags = DevRoots((tmp_path / "mine" / ".." / "data",), (tmp_path / "hf",)).absolute()
    policies = dev_policies(earlier, flags)
    assert policies["*"] == {"maxSteps": 10}
    assert policies["dev"]["datasetRoots"] == ["/srv/data", str(tmp_path / "data")]
    assert policies["dev"]["modelRoots"] == [str(tmp_path / "hf")]
    assert policies["dev"]["maxGpus"] == 0 and "dataset_roots" not in policies["dev"]


def test_the_dev_token_is_kept_private_and_reused(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "dev"
    first = dev_token(folder, replace=False)
    assert stat.S_IMODE((folder / "token").stat().st_mode) == 0o600
    assert dev_token(folder, replace=False) == first
    replaced = dev_token(folder, replace=True)
    assert replaced != first and dev_token(folder, replace=False) == replaced
    (folder / "token").chmod(0o644)
    with pytest.raises(typer.BadParameter, match="readable by others"):
        dev_token(folder, replace=False)


def test_a_dev_refusal_names_the_flag_that_widens_the_roots(
    redis_db: redis.Redis, embedded_redis: Any, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "problems.jsonl").write_text('{"question": "1+1", "answer": "2"}\n')
    inside = runs / "datasets" / "dev"
    with _app(redis_db, embedded_redis, runs, dev=True) as api:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        body = spec_data(environment=_dataset(elsewhere / "problems.jsonl"), policy={"path": str(inside)})
        message = _refusal(api.post("/v1/experiments", json=body, headers=headers), "environment.path")
        assert str(inside) in message and "lecritique api serve --dev --dataset-root PATH" in message
        models = runs / "models" / "dev"
        body = spec_data(policy={"path": str(elsewhere / "policy")})
        message = _refusal(api.post("/v1/experiments", json=body, headers=headers), "policy.path")
        assert str(models) in message and "--model-root PATH" in message
        # A link inside the root that leads out is refused where the launcher resolves it, with the same hint.
        (inside / "link.jsonl").symlink_to(elsewhere / "problems.jsonl")
        body = spec_data(environment=_dataset(inside / "link.jsonl"), policy={"path": str(models / "p")})
        message = _refusal(api.post("/v1/experiments", json=body, headers=headers), "environment.path")
        assert "resolves outside" in message and "--dataset-root PATH" in message


def test_an_operator_refusal_names_the_policy_key(
    redis_db: redis.Redis, embedded_redis: Any, tmp_path: Path
) -> None:
    with _app(redis_db, embedded_redis, tmp_path / "runs", dev=False) as api:
        body = spec_data(environment=_dataset("/srv/problems.jsonl"))
        response = api.post("/v1/experiments", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
        message = _refusal(response, "environment.path")
        assert "datasetRoots" in message and "LECRITIQUE_API_TENANT_POLICIES" in message
        assert "--dataset-root" not in message
        assert "modelRoots" in _refusal(response, "policy.path")


# ---- a real `lecritique api serve --dev`, started twice ---------------------------------------
@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[list[DevApi]]:
    started: list[DevApi] = []
    yield started
    for api in started:
        api.stop()


def _submit_and_cancel(api: DevApi, body: dict[str, Any]) -> httpx.Response:
    with api.client() as client:
        response = client.post("/v1/experiments", json=body)
        if response.status_code == 201:
            client.delete(f"/v1/experiments/{response.json()['id']}")
        return response


@pytest.mark.slow(seconds=300)  # a quick policy, then the API started twice (390 s loaded)
@pytest.mark.timeout(900)
def test_serve_dev_takes_local_files_and_keeps_its_token(tmp_path: Path, restartable: list[DevApi]) -> None:
    first = DevApi(tmp_path)
    restartable.append(first)
    dev = first.runs / "dev"
    datasets, models = first.runs / "datasets" / "dev", first.runs / "models" / "dev"
    printed = (tmp_path / "api.log").read_text()
    assert f"may lie under: {datasets} (more: --dataset-root PATH)" in printed, printed
    assert f"may lie under: {models} (more: --model-root PATH)" in printed, printed
    assert stat.S_IMODE((dev / "token").stat().st_mode) == 0o600
    assert (dev / "token").read_text().strip() == first.token
    mine = tmp_path / "my-data"
    mine.mkdir()
    (mine / "problems.jsonl").write_text('{"question": "1+1", "answer": "2"}\n')

    # Issue 48 item 3: the model staged as `models stage` is told to for --dev is usable as printed.
    staged = subprocess.run(
        [
            sys.executable,
            "-m",
            "lecritique",
            "models",
            "stage",
            str(quick_policy()),
            "--tenant",
            "dev",
            "--root",
            str(first.runs),
            "--name",
            "policy",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "libs"), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    model = Path(staged.stdout.split("policy: {path: ", 1)[1].split("}", 1)[0])
    assert model == models / "policy"

    def body(path: Path | str) -> dict[str, Any]:
        return spec_data(environment=_dataset(path), policy={"path": str(model)}, orchestrator={"steps": 2})

    # A relative dataset path is refused with advice; following it (copy the file under the first
    # folder the refusal names) makes the same spec, with that absolute path, accepted.
    message = _refusal(_submit_and_cancel(first, body("problems.jsonl")), "environment.path")
    assert "or copy the file under the first one" in message, message
    first_root = Path(message.split("lie under ['", 1)[1].split("'", 1)[0])
    assert first_root == datasets and first_root.is_dir(), message
    shutil.copy(mine / "problems.jsonl", first_root / "problems.jsonl")
    accepted = _submit_and_cancel(first, body(first_root / "problems.jsonl"))
    assert accepted.status_code == 201, accepted.text
    refused = _submit_and_cancel(first, body(mine / "problems.jsonl"))
    assert "--dataset-root PATH" in _refusal(refused, "environment.path")
    first.stop()
    restartable.remove(first)

    second = DevApi(tmp_path, "--dataset-root", str(mine))
    restartable.append(second)
    assert second.token == first.token
    widened = _submit_and_cancel(second, body(mine / "problems.jsonl"))
    assert widened.status_code == 201, widened.text
