"""``/v1/experiments``: submit, list, inspect, read metrics, cancel (bearer token required)."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import Executor
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import Counter

from lecritique.client.models import ExperimentFields
from lecritique.launch.host_paths import HostPaths, spec_paths
from services.api.auth import TokenRegistry
from services.api.body import parse_body
from services.api.errors import Unauthorized, host_paths
from services.api.experiments import ExperimentService, NotFound
from services.api.openapi import (
    INVALID,
    READ_RESPONSES,
    SUBMIT_RESPONSES,
    UNAUTHORIZED,
    UNAVAILABLE,
    submit_request_body,
)
from services.api.records import ExperimentRecord
from services.api.schemas import ExperimentList, ExperimentView, MetricsSeries

SUBMITTED = Counter("lecritique_api_experiments_submitted_total", "Experiments accepted", ["launcher"])
EXPERIMENT_ID = re.compile(r"exp-[0-9a-f]{10}")
MAX_OFFSET = 100_000
MAX_STEP = 1_000_000_000

router = APIRouter(prefix="/v1/experiments", tags=["experiments"])
_bearer = HTTPBearer(auto_error=False, description="A tenant's bearer token (only its SHA-256 is stored).")


def _tenant(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    """The tenant whose bearer token the request carries; 401 otherwise."""
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise Unauthorized("missing bearer token")
    tokens: TokenRegistry = request.app.state.tokens
    found = tokens.tenant_of(credentials.credentials)
    if found is None:
        raise Unauthorized("invalid bearer token")
    return found


def submission_pool(request: Request) -> Executor:
    """The threads that parse and validate submissions (``create_app`` sizes them); reads and health
    probes never wait for one."""
    pool: Executor = request.app.state.submission_pool
    return pool


def _service(request: Request) -> ExperimentService:
    service: ExperimentService = request.app.state.service
    return service


Tenant = Annotated[str, Depends(_tenant)]
Service = Annotated[ExperimentService, Depends(_service)]
Paths = Annotated[HostPaths, Depends(host_paths)]


def _view(
    service: ExperimentService, record: ExperimentRecord, paths: HostPaths, *, with_spec: bool
) -> ExperimentView:
    """The record as its tenant reads it (an error names no host folder: :class:`HostPaths`)."""
    shared = record.model_dump(include=set(ExperimentFields.model_fields))
    if record.error:
        shared["error"] = paths.hide(record.error, record.handle.get("run_dir"), spec_paths(record.spec))
    return ExperimentView(**shared, spec=record.spec if with_spec else None, **service.details(record))


def known_id(experiment_id: str) -> str:
    """Ids the API never issues cannot exist: 404 without a lookup (and without echoing them)."""
    if not EXPERIMENT_ID.fullmatch(experiment_id):
        raise NotFound(experiment_id[:40])
    return experiment_id


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ExperimentView,
    responses=SUBMIT_RESPONSES,
    summary="Submit an experiment",
    operation_id="submit_experiment",
    openapi_extra=submit_request_body(),
)
async def submit(
    request: Request,
    response: Response,
    caller: Tenant,
    service: Service,
    paths: Paths,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=255,
            description="Retries with the same key and body return the same experiment.",
        ),
    ] = None,
) -> ExperimentView:
    """Validate the experiment spec (JSON, or YAML with ``Content-Type: application/yaml``) against the
    spec and the tenant's policy, record it and launch it."""
    raw = await request.body()
    # Parsing and validation run in the submissions' own threads, never on the event loop, so that
    # health probes and reads are answered while a large body is read (issue #46, item 4).
    loop, pool = asyncio.get_running_loop(), submission_pool(request)
    body = await loop.run_in_executor(pool, parse_body, raw, request.headers.get("content-type"))
    record, replayed = await loop.run_in_executor(pool, service.submit, caller, body, idempotency_key)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    else:
        SUBMITTED.labels(record.launcher).inc()
    response.headers["Location"] = f"/v1/experiments/{record.id}"
    return _view(service, record, paths, with_spec=False)


@router.get(
    "",
    response_model=ExperimentList,
    summary="List your experiments",
    operation_id="list_experiments",
    responses={401: UNAUTHORIZED, 422: INVALID, 503: UNAVAILABLE},
)
def list_experiments(
    caller: Tenant,
    service: Service,
    paths: Paths,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most experiments returned.")] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Experiments skipped (newest first).")] = 0,
) -> ExperimentList:
    """The caller's experiments, newest first."""
    records = service.list_experiments(caller, limit, offset)
    return ExperimentList(experiments=[_view(service, r, paths, with_spec=False) for r in records])


@router.get(
    "/{experiment_id}",
    response_model=ExperimentView,
    summary="Inspect an experiment",
    operation_id="get_experiment",
    responses=READ_RESPONSES,
)
def get_experiment(experiment_id: str, caller: Tenant, service: Service, paths: Paths) -> ExperimentView:
    """Status, current step, policy and value versions, the latest metrics and the spec."""
    return _view(service, service.get(caller, known_id(experiment_id)), paths, with_spec=True)


@router.get(
    "/{experiment_id}/metrics",
    response_model=MetricsSeries,
    summary="Metrics series",
    operation_id="get_metrics",
    responses={**READ_RESPONSES, 422: INVALID},
)
def get_metrics(
    experiment_id: str,
    caller: Tenant,
    service: Service,
    since_step: Annotated[
        int | None, Query(ge=0, le=MAX_STEP, description="Only steps after this one.")
    ] = None,
) -> MetricsSeries:
    """One row per policy step, as the orchestrator recorded it."""
    experiment_id = known_id(experiment_id)
    rows, skipped = service.metrics(caller, experiment_id, since_step)
    return MetricsSeries(experiment_id=experiment_id, rows=rows, skipped_rows=skipped)


@router.delete(
    "/{experiment_id}",
    response_model=ExperimentView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Cancel an experiment",
    operation_id="cancel_experiment",
    responses=READ_RESPONSES,
)
def cancel(experiment_id: str, caller: Tenant, service: Service, paths: Paths) -> ExperimentView:
    """Stop its workloads (status ``cancelling`` until they are gone, then ``cancelled``); the record stays."""
    return _view(service, service.cancel(caller, known_id(experiment_id)), paths, with_spec=False)
