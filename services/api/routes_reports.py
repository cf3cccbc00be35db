"""What a client reads of an experiment besides its record: metrics as JSON lines, the report, logs.

* ``GET /v1/experiments/{id}/metrics.jsonl?offset=&limit=``: one JSON object per line, one line per
  policy step (the orchestrator's rows, oldest first), a page at a time; ``X-Total-Rows`` and, when
  more rows follow, ``X-Next-Offset`` and a ``Link: <...>; rel="next"`` header.
* ``GET /v1/experiments/{id}/report.png`` and ``report.md``: the run report (curves and summary),
  drawn from the metrics series in Redis, so it exists for running experiments and for either
  launcher; redrawn only when new rows arrive.
* ``GET /v1/experiments/{id}/logs?component=&tail=``: the last lines of a local run's log
  (``run``: the ``lecritique run`` console; or one service, e.g. ``orchestrator``).

The router is built by :func:`reports_router` with the app's tenant dependency, so authentication
stays in one place.
"""

# No ``from __future__ import annotations``: FastAPI must see the router's local ``Caller``
# dependency as an object, not as a name to look up in this module.
import json
import re
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.responses import PlainTextResponse

from services.api.experiments import ExperimentService, Forbidden, NotFound
from services.api.records import ExperimentRecord

METRICS_PAGE_LIMIT = 10_000
_COMPONENT = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_PNG = {"content": {"image/png": {}}, "description": "The curves: reward, held-out success, explained variance, rho."}
_MARKDOWN = {"content": {"text/markdown": {}}, "description": "The summary table."}
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
            rows = redis.lrange(_metrics_key(experiment_id), 0, count - 1) if count else []
            if not rows:
                raise HTTPException(status.HTTP_404_NOT_FOUND, f"experiment {experiment_id!r} has no metrics yet: no report")
            with tempfile.TemporaryDirectory(prefix="lecritique-report-") as folder:
                run_dir = Path(folder)
                (run_dir / "metrics.jsonl").write_bytes(b"".join(row.rstrip(b"\n") + b"\n" for row in rows))
                png, markdown = write_report(run_dir, title=title)
                result = (png.read_bytes(), markdown.read_bytes())
            self._cache[experiment_id] = (len(rows), *result)
            return result


def load_record(request: Request, caller: str, experiment_id: str) -> ExperimentRecord:
    """The caller's experiment, or 404 / 403 as the other experiment routes answer."""
    service: ExperimentService = request.app.state.service
    try:
        return service.get(caller, experiment_id, refresh=False)
    except NotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no experiment {experiment_id!r}") from None
    except Forbidden:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"experiment {experiment_id!r} belongs to another tenant") from None


def _redis(request: Request) -> Any:
    return request.app.state.service.store.redis


def metrics_page(request: Request, experiment_id: str, offset: int, limit: int) -> Response:
    redis = _redis(request)
    total = int(redis.llen(_metrics_key(experiment_id)))
    rows = redis.lrange(_metrics_key(experiment_id), offset, offset + limit - 1) if offset < total else []
    headers = {"X-Total-Rows": str(total)}
    if offset + len(rows) < total:
        following = offset + len(rows)
        headers["X-Next-Offset"] = str(following)
        headers["Link"] = f'<{request.url.path}?offset={following}&limit={limit}>; rel="next"'
    body = b"".join(json.dumps(json.loads(row), separators=(",", ":")).encode() + b"\n" for row in rows)
    return Response(body, media_type="application/x-ndjson", headers=headers)


def log_tail(record: ExperimentRecord, component: str, lines: int) -> str:
    if "run_dir" not in record.handle:
        raise HTTPException(
            status.HTTP_501_NOT_IMPLEMENTED,
            f"logs of {record.launcher} experiments are not served: kubectl logs -l lecritique.dev/experiment={record.id}",
        )
    if not _COMPONENT.match(component):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"component {component!r} is not a process name")
    run_dir = Path(record.handle["run_dir"])
    path = run_dir / "run.log" if component == "run" else run_dir / "run" / "logs" / f"{component}.log"
    if not path.is_file():
        known = sorted(p.stem for p in (run_dir / "run" / "logs").glob("*.log"))
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no log {component!r} (known: run, {', '.join(known)})")
    with path.open(errors="replace") as handle:
        return "".join(deque(handle, maxlen=lines))


def reports_router(tenant: Callable[..., str]) -> APIRouter:
    """The routes, authenticated by the app's ``tenant`` dependency (bearer token -> tenant)."""
    router = APIRouter(prefix="/v1/experiments", tags=["reports"])
    renderer = ReportRenderer()
    Caller = Annotated[str, Depends(tenant)]
    Offset = Annotated[int, Query(ge=0, description="First row (0: the first policy step recorded).")]
    Limit = Annotated[int, Query(ge=1, le=METRICS_PAGE_LIMIT, description="Rows in this page.")]
    Component = Annotated[str, Query(description="run (the lecritique run console) or a service: orchestrator, rollout-0, ...")]
    Tail = Annotated[int, Query(ge=1, le=100_000, description="Last lines to return.")]

    @router.get("/{experiment_id}/metrics.jsonl", response_class=Response, responses={200: _JSON_LINES}, summary="Metrics as JSON lines")
    def metrics_lines(experiment_id: str, request: Request, caller: Caller, offset: Offset = 0, limit: Limit = 1000) -> Response:
        """One metrics row per line, oldest first, ``limit`` rows from ``offset``."""
        load_record(request, caller, experiment_id)
        return metrics_page(request, experiment_id, offset, limit)

    @router.get("/{experiment_id}/report.png", response_class=Response, responses={200: _PNG}, summary="Report curves (PNG)")
    def report_png(experiment_id: str, request: Request, caller: Caller) -> Response:
        """The report's curves, drawn from the metrics recorded so far."""
        record = load_record(request, caller, experiment_id)
        return Response(renderer.render(_redis(request), experiment_id, record.name)[0], media_type="image/png")

    @router.get("/{experiment_id}/report.md", response_class=Response, responses={200: _MARKDOWN}, summary="Report summary (Markdown)")
    def report_markdown(experiment_id: str, request: Request, caller: Caller) -> Response:
        """The report's summary table; it links the curves as ``report.png``."""
        record = load_record(request, caller, experiment_id)
        return Response(renderer.render(_redis(request), experiment_id, record.name)[1], media_type="text/markdown; charset=utf-8")

    @router.get("/{experiment_id}/logs", response_class=PlainTextResponse, summary="Log tail")
    def logs(experiment_id: str, request: Request, caller: Caller, component: Component = "run", tail: Tail = 200) -> str:
        """The last ``tail`` lines of a local run's log (Kubernetes: ``kubectl logs``)."""
        return log_tail(load_record(request, caller, experiment_id), component, tail)

    return router
