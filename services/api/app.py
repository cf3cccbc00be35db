"""The FastAPI application: settings -> store, launcher and routers; background reconcile.

Run it with ``python -m services.api`` (what ``lecritique api serve`` starts) or
``uvicorn services.api.app:create_app_from_env --factory``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from prometheus_client import Counter, Histogram

from lecritique import __version__
from lecritique.launch.base import ExperimentLauncher
from lecritique.launch.host_paths import HostPaths
from lecritique.launch.redis_acl import ExperimentUsers
from lecritique.tenancy.policy import resolve_policy
from lecritique.tenancy.spec_rules import DEV_ROOTS_WIDENED_BY, ROOTS_WIDENED_BY
from services.api.auth import TokenRegistry
from services.api.body import BodySizeLimit
from services.api.docs_page import install_docs
from services.api.errors import install_error_handlers
from services.api.experiments import ExperimentService
from services.api.openapi import install_openapi
from services.api.records import RecordStore
from services.api.routes import experiments, health, reports
from services.api.settings import ApiSettings

logger = logging.getLogger(__name__)

REQUESTS = Counter("lecritique_api_requests_total", "REST requests handled", ["method", "route", "code"])
LATENCY = Histogram("lecritique_api_request_seconds", "REST request latency", ["method", "route"])


def make_launcher(settings: ApiSettings) -> ExperimentLauncher:
    """The launcher the settings name."""
    if settings.launcher == "kubernetes":
        from lecritique.launch.kubernetes.launcher import KubernetesLauncher

        if settings.launcher_defaults is None:
            raise ValueError("LECRITIQUE_API_LAUNCHER_DEFAULTS must name the chart's launcher-defaults.json")
        return KubernetesLauncher.from_files(settings.launcher_defaults, settings.namespace)
    from lecritique.launch.api_local.launcher import LocalProcessLauncher

    return LocalProcessLauncher(
        settings.runs_dir,
        settings.experiment_redis_url or settings.redis_url,
        cancel_grace_seconds=settings.cancel_grace_seconds,
        models_root=settings.models_root,
        env_passthrough=settings.env_passthrough,
    )


def _lifespan(
    service: ExperimentService, period: float
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def reconcile_forever() -> None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(service.store.rebuild_running_sets)
            while True:
                try:
                    await asyncio.to_thread(service.reconcile)
                except Exception as error:
                    logger.warning("reconcile failed: %s: %s", type(error).__name__, error)
                await asyncio.sleep(period)

        task = asyncio.create_task(reconcile_forever())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return lifespan


class RequestMetrics:
    """ASGI middleware counting requests by method, route template and status code.

    Pure ASGI (not ``BaseHTTPMiddleware``): that one reads request bodies in a task of its own,
    where the body-size limit's error would escape the route's error handlers.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), [500]

        async def observed_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            REQUESTS.labels(scope["method"], path, str(status[0])).inc()
            LATENCY.labels(scope["method"], path).observe(time.perf_counter() - start)


def _host_paths(settings: ApiSettings) -> HostPaths:
    """What a tenant's messages show of this host: the runs folder by name; the models and datasets
    roots by name (``<models>/<tenant>``) where they are the host's own folders (the local launcher),
    as written where they are the pods' (``/weights/...`` under Kubernetes) or where the tenant is the
    host's owner (``--dev``); the roots a policy adds as written (the operator gave them to the tenant)."""
    roots = []
    for name in settings.tenant_policies:
        policy = resolve_policy(settings.tenant_policies, name)
        roots += [*policy.model_roots, *policy.dataset_roots]
    named: dict[str, str | Path] = {"<runs>": settings.runs_dir}
    if settings.launcher == "local" and not settings.dev:
        named.update({"<models>": settings.models_root, "<datasets>": settings.datasets_root})
    else:
        roots += [settings.models_root, settings.datasets_root]
    return HostPaths.of(named, kept=roots)


def create_app(
    settings: ApiSettings, *, launcher: ExperimentLauncher | None = None, redis_client: Any | None = None
) -> FastAPI:
    """The application for ``settings`` (tests may pass their own launcher or Redis client)."""
    from lecritique.redis_connection import redis_client as make_redis_client

    client = (
        redis_client
        if redis_client is not None
        else make_redis_client(settings.redis_url, socket_timeout_s=10.0)
    )
    tokens = TokenRegistry(settings.tokens, settings.tokens_file)
    if not tokens.tenants:
        logger.warning("no API tokens configured: every /v1 request will get 401")
    launcher = launcher or make_launcher(settings)
    runs_url = getattr(launcher, "runs_redis_url", None)
    service = ExperimentService(
        RecordStore(client),
        launcher,
        policies=settings.tenant_policies,
        models_root=settings.models_root,
        datasets_root=settings.datasets_root,
        pending_grace_seconds=settings.pending_grace_seconds,
        roots_widened_by=DEV_ROOTS_WIDENED_BY if settings.dev else ROOTS_WIDENED_BY,
        users=ExperimentUsers(client, runs_url) if runs_url else None,
    )
    app = FastAPI(
        title="lecritique",
        version=__version__,
        description="Submit, inspect and cancel RL experiments with learned critics (PVF, TETHER, GenAC, LVRL).",
        lifespan=_lifespan(service, settings.reconcile_seconds),
        # Swagger UI from the installed package (services/api/docs_page.py), not FastAPI's CDN; no ReDoc.
        docs_url=None,
        redoc_url=None,
    )
    app.state.service, app.state.tokens, app.state.settings, app.state.redis = (
        service,
        tokens,
        settings,
        client,
    )
    app.state.host_paths = _host_paths(settings)
    app.state.submission_pool = ThreadPoolExecutor(
        max_workers=settings.submission_threads, thread_name_prefix="submit"
    )
    app.add_middleware(RequestMetrics)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    install_error_handlers(app)
    app.include_router(experiments.router)
    app.include_router(reports.router)
    app.include_router(health.router)
    install_openapi(app)
    install_docs(app)
    return app


def create_app_from_env() -> FastAPI:
    """The application configured from ``LECRITIQUE_API_*`` variables (uvicorn ``--factory``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s api %(levelname)s %(name)s: %(message)s")
    return create_app(ApiSettings.from_env())
