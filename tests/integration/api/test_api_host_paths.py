"""What a tenant sees over the API names no folder of the API's host (issue #37, item 9).

Before the fix, error bodies and failed records showed absolute host paths: the run folder under
the API's runs directory, the checkout and the Python installation in a failed run's traceback. Now
a path under the run folder or the runs folder is shown relative to it (``<run>/...``,
``<runs>/...``), one in the checkout or the interpreter's installation as ``<lecritique>/...`` /
``<python>/...``, and any other absolute path by its last component only; the same in the logs the
API serves. What the tenant writes itself stays as written: the paths of its own spec; its model
root is named as ``<models>/<tenant>`` (issue #46, item 4: a refusal named the host's folder).
Real API processes with the local launcher.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lecritique.client import LecritiqueClient
from tests.helm_support import ROOT, tiny_spec_data
from tests.integration.api.api_process import ApiProcess, local_api_settings

TOKEN = "host-paths-token"


def _host_paths(tmp_path: Path) -> list[str]:
    """Folders of this host that must not appear in anything the tenant reads: the runs folders, the
    target of a link in the tenant's root, the checkout, the interpreter."""
    return [
        str(tmp_path / "runs"),
        str(tmp_path / "elsewhere"),
        str(ROOT),
        sys.prefix,
        sys.base_prefix,
        str(Path(sys.executable).parent),
    ]


def _api(tmp_path: Path, redis_url: str, runs: Path) -> ApiProcess:
    settings = local_api_settings(
        redis_url,
        runs,
        {"tester": TOKEN},
        {},
        models_root=str(tmp_path / "models"),
        datasets_root=str(tmp_path / "datasets"),
    )
    return ApiProcess(settings, tmp_path / f"api-{runs.name}.log").start()


def _wait_final(api: ApiProcess, experiment: str, seconds: float = 300) -> dict[str, Any]:
    """The experiment once final, as the tenant's client waits for it (``LecritiqueClient.wait``)."""
    with LecritiqueClient(api.url, TOKEN) as client:
        return client.wait(experiment, poll_seconds=1, timeout=seconds).model_dump()


def test_a_failed_run_and_a_refused_path_name_no_host_folder(
    tmp_path: Path, embedded_redis: Any, redis_db: Any
) -> None:
    empty_model = tmp_path / "models" / "tester" / "policy"
    empty_model.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "models" / "tester" / "link").symlink_to(outside)
    api = _api(tmp_path, embedded_redis.url, tmp_path / "runs")
    try:
        with api.client(TOKEN) as client:
            refused = client.post(
                "/v1/experiments",
                json=tiny_spec_data("paths", steps=1, policy_path=tmp_path / "models/tester/link"),
            )
            assert refused.status_code == 403, refused.text
            created = client.post(
                "/v1/experiments", json=tiny_spec_data("paths", steps=1, policy_path=empty_model)
            )
            assert created.status_code == 201, created.text
            failed = _wait_final(api, created.json()["id"])
            listed = client.get("/v1/experiments").text
            log = client.get(f"/v1/experiments/{created.json()['id']}/logs", params={"component": "run"}).text
    finally:
        api.stop()
    assert failed["status"] == "failed" and failed["error"], failed
    for text in (refused.text, failed["error"], listed, log):
        for host in _host_paths(tmp_path):
            assert host not in text, (host, text)
    # The tenant's model root as the tenant sees it (issue #46, item 4: it named the host's folder).
    assert "policy.path" in refused.text and "<models>/tester" in refused.text, refused.text
    assert str(tmp_path / "models") not in refused.text, refused.text
    assert "lecritique run exited with code" in failed["error"] and "<run>/" in failed["error"], failed[
        "error"
    ]


def test_a_launch_failure_names_no_host_folder(tmp_path: Path, embedded_redis: Any, redis_db: Any) -> None:
    runs = tmp_path / "runs-is-a-file"
    runs.write_text("not a folder")
    model = tmp_path / "models" / "tester" / "policy"
    model.mkdir(parents=True)
    api = _api(tmp_path, embedded_redis.url, runs)
    try:
        with api.client(TOKEN) as client:
            created = client.post("/v1/experiments", json=tiny_spec_data("paths", steps=1, policy_path=model))
            assert created.status_code == 201, created.text
            view = created.json()
    finally:
        api.stop()
    assert view["status"] == "failed" and view["error"].startswith("launch failed"), view
    for host in _host_paths(tmp_path):
        assert host not in view["error"], (host, view["error"])
    assert "<runs>/" in view["error"], view["error"]


def test_a_refused_model_path_names_the_tenants_root_as_the_tenant_sees_it(
    tmp_path: Path, embedded_redis: Any, redis_db: Any
) -> None:
    """Issue #46, item 4: the 403 named ``['/<host dir>/models/bob']``. In process, local launcher."""
    from fastapi.testclient import TestClient

    from lecritique.launch.api_local.launcher import LocalProcessLauncher
    from lecritique.tenancy.tokens import hash_token
    from services.api.app import create_app
    from services.api.settings import ApiSettings

    settings = ApiSettings(
        redis_url=embedded_redis.url,
        launcher="local",
        tokens={"bob": hash_token(TOKEN)},
        runs_dir=tmp_path / "runs",
        models_root=str(tmp_path / "models"),
        datasets_root=str(tmp_path / "datasets"),
        reconcile_seconds=3600,
    )
    launcher = LocalProcessLauncher(tmp_path / "runs", embedded_redis.url, models_root=settings.models_root)
    with TestClient(create_app(settings, launcher=launcher, redis_client=redis_db)) as api:
        for path in ("/etc/passwd", str(tmp_path / "models" / "alice" / "policy")):
            refused = api.post(
                "/v1/experiments",
                json=tiny_spec_data("paths", steps=1, policy_path=Path(path)),
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert refused.status_code == 403, refused.text
            assert "<models>/bob" in refused.text, refused.text
            assert str(tmp_path) not in refused.text.replace(path, ""), refused.text
