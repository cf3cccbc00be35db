"""What a client reads of an experiment besides its record: metrics as JSON lines, the report, logs.

* ``GET /v1/experiments/{id}/metrics.jsonl?offset=&limit=``: one JSON object per line, one line per
  policy step (the orchestrator's rows, oldest first), a page at a time; ``X-Total-Rows`` and, when
  more rows follow, ``X-Next-Offset`` and a ``Link: <...>; rel="next"`` header; a row the run wrote
  malformed is left out and counted in ``X-Skipped-Rows`` (offsets count the rows as stored).
* ``GET /v1/experiments/{id}/report.png`` and ``report.md``: the run report (curves and summary),
  drawn from the metrics series in Redis, so it exists for running experiments and for either
  launcher; redrawn only when new rows arrive.
* ``GET /v1/experiments/{id}/logs?component=&tail=``: the last lines of one component's log, read
  by the experiment's launcher (local: ``run``, the ``lecritique run`` console, or one service's
  file, e.g. ``orchestrator``; Kubernetes: the pod's log, e.g. ``rollout-1``).

Authentication and the 404 for unknown or other tenants' ids are the experiments router's
(``Tenant``, ``known_id``), so they stay in one place.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.responses import PlainTextResponse

from lecritique.launch.base import LogNotFound
from lecritique.launch.host_paths import spec_paths
from services.api.errors import host_paths
from services.api.experiments import ExperimentService
from services.api.openapi import ERROR, INVALID, READ_RESPONSES
from services.api.records import ExperimentRecord, metrics_row
from services.api.routes.experiments import Tenant, known_id

METRICS_PAGE_LIMIT = 10_000
_COMPONENT = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_PNG = {
    "content": {"image/png": {}},
    "description": "The curves: reward, held-out success, explained variance, rho.",
}
_MARKDOWN = {"content": {"text/markdown": {}}, "description": "The summary table."}
# Spelled out as JSON: with a non-JSON response class FastAPI would document a ``model`` response
# in the route's own media type, and every error here is an ErrorResponse in JSON.
_ERRORS = {
    code: {key: value for key, value in response.items() if key != "model"} | {"content": ERROR}
    for code, response in {**READ_RESPONSES, 422: INVALID}.items()
}
_TEXT = {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "The log's last lines."}
_JSON_LINES = {"content": {"application/x-ndjson": {}}, "description": "One metrics row per line."}


def _metrics_key(experiment_id: str) -> str:
    # Written by each experiment's orchestrator (see services/api/records.py).
    return f"lecritique:{experiment_id}:metrics"


class ReportRenderer:
    """report.png / report.md of a metrics series, cached until the series grows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # matplotlib's pyplot is not thread-safe
        self._cache: dict[str, tuple[int, bytes, bytes]] = {}

    def render(self, redis: Any, experiment_id: str, title: str) -> tuple[bytes, bytes]:
        from lecritique.reporting import write_report

        with self._lock:
            count = int(redis.llen(_metrics_key(experiment_id)))
            cached = self._cache.get(experiment_id)
            if cached is not None and cached[0] == count:
                return cached[1], cached[2]
            raws = redis.lrange(_metrics_key(experiment_id), 0, count - 1) if count else []
            # A row the run wrote malformed is left out (records.metrics_row), as everywhere else.
            rows = [json.dumps(row).encode() for row in map(metrics_row, raws) if row is not None]
            if not rows:
                raise HTTPException(
                    status.HTTP_404_NOT_FOUND, f"experiment {experiment_id!r} has no metrics yet: no report"
                )
            with tempfile.TemporaryDirectory(prefix="lecritique-report-") as folder:
                run_dir = Path(folder)
                (run_dir / "metrics.jsonl").write_bytes(b"".join(row.rstrip(b"\n") + b"\n" for row in rows))
                png, markdown = write_report(run_dir, title=title)
                result = (png.read_bytes(), markdown.read_bytes())
            self._cache[experiment_id] = (len(raws), *result)
            return result


def load_record(request: Request, caller: str, experiment_id: str) -> ExperimentRecord:
    """The caller's experiment; 404 (errors.py) for an id it does not own, as the other routes answer."""
    service: ExperimentService = request.app.state.service
    return service.get(caller, known_id(experiment_id), refresh=False)


def _redis(request: Request) -> Any:
    return request.app.state.service.store.redis


def metrics_page(request: Request, experiment_id: str, offset: int, limit: int) -> Response:
    redis = _redis(request)
    total = int(redis.llen(_metrics_key(experiment_id)))
    raws = redis.lrange(_metrics_key(experiment_id), offset, offset + limit - 1) if offset < total else []
    rows = [row for row in map(metrics_row, raws) if row is not None]
    headers = {"X-Total-Rows": str(total)}
    if len(rows) < len(raws):
        # Offsets count the series' rows as stored; a malformed one is skipped (records.metrics_row).
        headers["X-Skipped-Rows"] = str(len(raws) - len(rows))
    if offset + len(raws) < total:
        following = offset + len(raws)
        headers["X-Next-Offset"] = str(following)
        headers["Link"] = f'<{request.url.path}?offset={following}&limit={limit}>; rel="next"'
    body = b"".join(json.dumps(row, separators=(",", ":")).encode() + b"\n" for row in rows)
    return Response(body, media_type="application/x-ndjson", headers=headers)


def log_tail(request: Request, record: ExperimentRecord, component: str, lines: int) -> str:
    if not _COMPONENT.fullmatch(component):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, f"component {component[:64]!r} is not a process name"
        )
    service: ExperimentService = request.app.state.service
    try:
        text = service.launcher.logs(record.id, record.handle, component, lines)
    except LogNotFound as missing:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(missing)) from None
    # The tenant's own logs, with the host's folders named as in its error messages.
    return host_paths(request).hide(text, record.handle.get("run_dir"), spec_paths(record.spec))


router = APIRouter(prefix="/v1/experiments", tags=["reports"])
_renderer = ReportRenderer()
Caller = Tenant
Offset = Annotated[int, Query(ge=0, description="First row (0: the first policy step recorded).")]
Limit = Annotated[int, Query(ge=1, le=METRICS_PAGE_LIMIT, description="Rows in this page.")]
Component = Annotated[
    str, Query(description="run (the lecritique run console) or a service: orchestrator, rollout-0, ...")
]
Tail = Annotated[int, Query(ge=1, le=100_000, description="Last lines to return.")]


@router.get(
    "/{experiment_id}/metrics.jsonl",
    response_class=Response,
    responses={200: _JSON_LINES, **_ERRORS},
    operation_id="get_metrics_lines",
    summary="Metrics as JSON lines",
)
def metrics_lines(
    experiment_id: str, request: Request, caller: Caller, offset: Offset = 0, limit: Limit = 1000
) -> Response:
    """One metrics row per line, oldest first, ``limit`` rows from ``offset``."""
    load_record(request, caller, experiment_id)
    return metrics_page(request, experiment_id, offset, limit)


@router.get(
    "/{experiment_id}/report.png",
    response_class=Response,
    responses={200: _PNG, **_ERRORS},
    operation_id="get_report_png",
    summary="Report curves (PNG)",
)
def report_png(experiment_id: str, request: Request, caller: Caller) -> Response:
    """The report's curves, drawn from the metrics recorded so far."""
    record = load_record(request, caller, experiment_id)
    return Response(_renderer.render(_redis(request), experiment_id, record.name)[0], media_type="image/png")


@router.get(
    "/{experiment_id}/report.md",
    response_class=Response,
    responses={200: _MARKDOWN, **_ERRORS},
    operation_id="get_report_markdown",
    summary="Report summary (Markdown)",
)
def report_markdown(experiment_id: str, request: Request, caller: Caller) -> Response:
    """The report's summary table; it links the curves as ``report.png``."""
    record = load_record(request, caller, experiment_id)
    return Response(
        _renderer.render(_redis(request), experiment_id, record.name)[1],
        media_type="text/markdown; charset=utf-8",
    )


@router.get(
    "/{experiment_id}/logs",
    response_class=PlainTextResponse,
    responses={200: _TEXT, **_ERRORS},
    operation_id="get_logs",
    summary="Log tail",
)
def logs(
    experiment_id: str, request: Request, caller: Caller, component: Component = "run", tail: Tail = 200
) -> str:
    """The last ``tail`` lines of a local run's log (Kubernetes: ``kubectl logs``)."""
    return log_tail(request, load_record(request, caller, experiment_id), component, tail)
