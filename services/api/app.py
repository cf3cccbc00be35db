"""The FastAPI application: routes, authentication, error mapping, metrics, background reconcile.

Run it with ``lecritique api serve`` or ``uvicorn services.api.app:create_app_from_env --factory``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

from lecritique import __version__
from services.api.auth import TokenRegistry
from services.api.experiments import ExperimentService, FieldError, Forbidden, InvalidSpec, NotFound
from services.api.launchers import ExperimentLauncher, KubernetesExperimentLauncher, LocalProcessLauncher
from services.api.records import ExperimentRecord, IdempotencyConflict, IdempotencyInProgress, RecordStore
from services.api.schemas import ErrorDetail, ExperimentList, ExperimentView, MetricsSeries, SpecErrorResponse
from services.api.settings import ApiSettings

logger = logging.getLogger(__name__)

REQUESTS = Counter("lecritique_api_requests_total", "REST requests handled", ["method", "route", "code"])
LATENCY = Histogram("lecritique_api_request_seconds", "REST request latency", ["method", "route"])
SUBMITTED = Counter("lecritique_api_experiments_submitted_total", "Experiments accepted", ["launcher"])

_bearer = HTTPBearer(auto_error=False, description="A tenant's bearer token (only its SHA-256 is stored).")
_UNAUTHORIZED = {"WWW-Authenticate": 'Bearer realm="lecritique"'}


def _tenant(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> str:
    """The tenant whose bearer token the request carries; 401 otherwise."""
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token", headers=_UNAUTHORIZED)
    tokens: TokenRegistry = request.app.state.tokens
    found = tokens.tenant_of(credentials.credentials)
    if found is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid bearer token", headers=_UNAUTHORIZED)
    return found


Tenant = Annotated[str, Depends(_tenant)]


def _view(service: ExperimentService, record: ExperimentRecord, *, with_spec: bool) -> ExperimentView:
    return ExperimentView(
        id=record.id, name=record.name, tenant=record.tenant, status=record.status, launcher=record.launcher,
        created_at=record.created_at, updated_at=record.updated_at, error=record.error,
        spec=record.spec if with_spec else None, **service.details(record),
    )


def create_app(settings: ApiSettings, *, launcher: ExperimentLauncher | None = None, redis_client: Any | None = None) -> FastAPI:
    """The application for ``settings`` (tests may pass their own launcher or Redis client)."""
    from lecritique.redis_connection import redis_client as make_redis_client

    client = redis_client if redis_client is not None else make_redis_client(settings.redis_url)
    if launcher is None:
        if settings.launcher == "kubernetes":
            if settings.launcher_defaults is None:
                raise ValueError("LECRITIQUE_API_LAUNCHER_DEFAULTS must name the chart's launcher-defaults.json")
            launcher = KubernetesExperimentLauncher.from_files(settings.launcher_defaults, settings.namespace)
        else:
            launcher = LocalProcessLauncher(settings.runs_dir, settings.redis_url, cancel_grace_seconds=settings.cancel_grace_seconds)
    tokens = TokenRegistry(settings.tokens, settings.tokens_file)
    if not tokens.tenants:
        logger.warning("no API tokens configured: every /v1 request will get 401")
    service = ExperimentService(RecordStore(client), launcher)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def reconcile_forever() -> None:
            while True:
                try:
                    await asyncio.to_thread(service.reconcile)
                except Exception:
                    logger.exception("reconcile failed")
                await asyncio.sleep(settings.reconcile_seconds)

        task = asyncio.create_task(reconcile_forever())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = FastAPI(
        title="lecritique",
        version=__version__,
        description="Submit, inspect and cancel RL experiments with learned critics (PVF, TETHER, GenAC, LVRL).",
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.tokens = tokens
    app.state.settings = settings

    @app.middleware("http")
    async def observe(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        REQUESTS.labels(request.method, path, str(response.status_code)).inc()
        LATENCY.labels(request.method, path).observe(time.perf_counter() - start)
        return response

    def load(caller: str, experiment_id: str) -> ExperimentRecord:
        try:
            return service.get(caller, experiment_id)
        except NotFound:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no experiment {experiment_id!r}") from None
        except Forbidden:
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"experiment {experiment_id!r} belongs to another tenant") from None

    @app.exception_handler(InvalidSpec)
    async def invalid_spec(request: Request, error: InvalidSpec) -> JSONResponse:
        body = SpecErrorResponse(
            detail=[ErrorDetail(field=e.field, message=e.message, type=e.type) for e in error.errors]
        )
        return JSONResponse(status_code=status.HTTP_422_UNPROCESSABLE_CONTENT, content=body.model_dump())

    @app.post(
        "/v1/experiments",
        status_code=status.HTTP_201_CREATED,
        response_model=ExperimentView,
        responses={422: {"model": SpecErrorResponse, "description": "Invalid spec: every offending field is named."}},
        summary="Submit an experiment",
    )
    async def submit(
        request: Request,
        response: Response,
        caller: Tenant,
        idempotency_key: Annotated[
            str | None,
            Header(alias="Idempotency-Key", max_length=255, description="Retries with the same key and body return the same experiment."),
        ] = None,
    ) -> ExperimentView:
        """Validate the experiment spec (JSON) and launch it; 201 with its id and status."""
        try:
            body = await request.json()
        except ValueError:
            raise InvalidSpec([FieldError("body", "the request body is not valid JSON", "json_invalid")]) from None
        try:
            record, replayed = await asyncio.to_thread(service.submit, caller, body, idempotency_key)
        except IdempotencyConflict:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                "Idempotency-Key was already used with a different request body",
            ) from None
        except IdempotencyInProgress:
            raise HTTPException(status.HTTP_409_CONFLICT, "a request with this Idempotency-Key is still in progress") from None
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
        else:
            SUBMITTED.labels(record.launcher).inc()
        response.headers["Location"] = f"/v1/experiments/{record.id}"
        return _view(service, record, with_spec=False)

    @app.get("/v1/experiments", response_model=ExperimentList, summary="List your experiments")
    def list_experiments(
        caller: Tenant,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> ExperimentList:
        """The caller's experiments, newest first."""
        records = service.list_experiments(caller, limit, offset)
        return ExperimentList(experiments=[_view(service, r, with_spec=False) for r in records])

    @app.get("/v1/experiments/{experiment_id}", response_model=ExperimentView, summary="Inspect an experiment")
    def get_experiment(experiment_id: str, caller: Tenant) -> ExperimentView:
        """Status, current step, policy and value versions, the latest metrics and the spec."""
        return _view(service, load(caller, experiment_id), with_spec=True)

    @app.get("/v1/experiments/{experiment_id}/metrics", response_model=MetricsSeries, summary="Metrics series")
    def get_metrics(
        experiment_id: str,
        caller: Tenant,
        since_step: Annotated[int | None, Query(ge=0, description="Only steps after this one.")] = None,
    ) -> MetricsSeries:
        """One row per policy step, as the orchestrator recorded it."""
        load(caller, experiment_id)
        return MetricsSeries(experiment_id=experiment_id, rows=service.metrics(caller, experiment_id, since_step))

    @app.delete(
        "/v1/experiments/{experiment_id}", response_model=ExperimentView, status_code=status.HTTP_202_ACCEPTED,
        summary="Cancel an experiment",
    )
    def cancel(experiment_id: str, caller: Tenant) -> ExperimentView:
        """Stop its workloads (status ``cancelling`` until they are gone, then ``cancelled``); the record stays."""
        load(caller, experiment_id)
        return _view(service, service.cancel(caller, experiment_id), with_spec=False)

    @app.get("/healthz", response_class=PlainTextResponse, summary="Liveness")
    def healthz() -> str:
        return "ok"

    @app.get("/readyz", response_class=PlainTextResponse, summary="Readiness (Redis reachable)")
    def readyz() -> Response:
        try:
            client.ping()
        except Exception as error:
            return PlainTextResponse(f"redis unavailable: {error}", status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
        return PlainTextResponse("ok")

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app


def create_app_from_env() -> FastAPI:
    """The application configured from ``LECRITIQUE_API_*`` variables (uvicorn ``--factory``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s api %(levelname)s %(name)s: %(message)s")
    return create_app(ApiSettings.from_env())
