"""Fixtures of the API tests: the API under test, in process or as a real process, and the
recording stand-in for the Kubernetes API server it launches on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from kubernetes import client as kubernetes_client

from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.launcher import KubernetesLauncher
from lecritique.tenancy.tokens import hash_token
from services.api.app import create_app
from services.api.settings import ApiSettings
from tests.helm_support import NAMESPACE, launcher_defaults
from tests.integration.api.api_process import ApiProcess
from tests.integration.api.kubernetes_recorder import RecordingApiServer

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"
"""The tokens of the in-process app."""


@pytest.fixture
def recorder() -> Iterator[RecordingApiServer]:
    """A recording stand-in for the Kubernetes API server (HTTP level only)."""
    server = RecordingApiServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def module_recorder() -> Iterator[RecordingApiServer]:
    """The recording Kubernetes endpoint of a module's API process (:func:`api`)."""
    server = RecordingApiServer()
    yield server
    server.close()


def kubernetes_api_settings(
    folder: Path,
    redis_url: str,
    recorder: RecordingApiServer,
    tokens: dict[str, str],
    policies: dict[str, Any],
    chart_values: dict[str, Any] | None = None,
    **extra: str,
) -> dict[str, str]:
    """LECRITIQUE_API_* settings of an API process with the kubernetes launcher on ``recorder``:
    the chart's launcher defaults (``chart_values`` over the default values), ``tokens`` (tenant ->
    plain token, stored hashed), the tenants' ``policies``, no periodic reconcile; ``extra`` adds or
    replaces settings."""
    defaults = folder / "launcher-defaults.json"
    defaults.write_text(json.dumps(launcher_defaults(chart_values)))
    return {
        "LECRITIQUE_API_REDIS_URL": redis_url,
        "LECRITIQUE_API_LAUNCHER": "kubernetes",
        "LECRITIQUE_API_LAUNCHER_DEFAULTS": str(defaults),
        "LECRITIQUE_API_TOKENS": json.dumps({tenant: hash_token(token) for tenant, token in tokens.items()}),
        "LECRITIQUE_API_TENANT_POLICIES": json.dumps(policies),
        "LECRITIQUE_API_RECONCILE_SECONDS": "3600",
        "KUBECONFIG": str(recorder.write_kubeconfig(folder / "kubeconfig", NAMESPACE)),
        **extra,
    }


def in_process_app(
    redis_db: redis.Redis,
    embedded_redis: Any,
    recorder: RecordingApiServer,
    tokens_file: Path | None = None,
    policies: dict[str, dict[str, Any]] | None = None,
) -> Any:
    """The API app with the kubernetes launcher on ``recorder``; tokens of alice and bob; the tenants'
    ``policies`` (default: every tenant may use models under /weights/models)."""
    settings = ApiSettings(
        redis_url=embedded_redis.url,
        launcher="kubernetes",
        tokens={"alice": hash_token(ALICE), "bob": hash_token(BOB)},
        tokens_file=tokens_file,
        reconcile_seconds=3600,
        tenant_policies=policies if policies is not None else {"*": {"model_roots": ["/weights/models"]}},
    )
    api_client = kubernetes_client.ApiClient(kubernetes_client.Configuration(host=recorder.url))
    launcher = KubernetesLauncher(ChartDefaults.model_validate(launcher_defaults()), api_client)
    return create_app(settings, launcher=launcher, redis_client=redis_db)


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Any:
    """The API under test.

    A module that defines (not imports) ``api_settings(folder, redis_url, recorder)`` (its LECRITIQUE_API_*
    settings) gets a real ``lecritique api serve`` process with them, started once for the module
    (an :class:`ApiProcess`; ``module_recorder`` is its Kubernetes endpoint). Any other module gets
    :func:`in_process_app` in a ``TestClient``, launching on the test's own ``recorder``, with Redis
    emptied before the test (``redis_db``).
    """
    settings = getattr(request.module, "api_settings", None)
    if settings is not None and settings.__module__ == request.module.__name__:  # defined, not imported
        return request.getfixturevalue("_api_process")
    return request.getfixturevalue("_api_in_process")


@pytest.fixture
def _api_in_process(
    redis_db: redis.Redis, embedded_redis: Any, recorder: RecordingApiServer
) -> Iterator[TestClient]:
    with TestClient(in_process_app(redis_db, embedded_redis, recorder)) as client:
        yield client


@pytest.fixture(scope="module")
def _api_process(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    embedded_redis: Any,
    module_recorder: RecordingApiServer,
) -> Iterator[ApiProcess]:
    folder = tmp_path_factory.mktemp(f"api-{request.module.__name__.rpartition('.')[2]}")
    settings = request.module.api_settings(folder, embedded_redis.url, module_recorder)
    process = ApiProcess(settings, folder / "api.log").start()
    yield process
    process.stop()
