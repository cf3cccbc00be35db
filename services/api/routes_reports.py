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

    def render(self, experiment_id: str, title: str, rows: list[bytes]) -> tuple[bytes, bytes]:
        from lecritique.reporting import write_report

        with self._lock:
            cached = self._cache.get(experiment_id)
            if cached is not None and cached[0] == len(rows):
                return cached[1], cached[2]
            with tempfile.TemporaryDirectory(prefix="lecritique-report-") as folder:
                run_dir = Path(folder)
                (run_dir / "metrics.jsonl").write_bytes(b"".join(row.rstrip(b"\n") + b"\n" for row in rows))
                png, markdown = write_report(run_dir, title=title)
                result = (png.read_bytes(), markdown.read_bytes())
            self._cache[experiment_id] = (len(rows), *result)
            return result


def _tail(path: Path, lines: int) -> str:
    with path.open(errors="replace") as handle:
        return "".join(deque(handle, maxlen=lines))


def reports_router(tenant: Callable[..., str]) -> APIRouter:
    """The routes, authenticated by the app's ``tenant`` dependency (bearer token -> tenant)."""
    router = APIRouter(prefix="/v1/experiments", tags=["reports"])
    renderer = ReportRenderer()
    Caller = Annotated[str, Depends(tenant)]

    def load(request: Request, caller: str, experiment_id: str) -> ExperimentRecord:
        service: ExperimentService = request.app.state.service
        try:
            return service.get(caller, experiment_id, refresh=False)
        except NotFound:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no experiment {experiment_id!r}") from None
        except Forbidden:
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"experiment {experiment_id!r} belongs to another tenant") from None

    def redis(request: Request) -> Any:
        return request.app.state.service.store.redis

    @router.get("/{experiment_id}/metrics.jsonl", response_class=Response, responses={200: _JSON_LINES}, summary="Metrics as JSON lines")
    def metrics_lines(
        experiment_id: str, request: Request, caller: Caller,
        offset: Annotated[int, Query(ge=0, description="First row (0: the first policy step recorded).")] = 0,
        limit: Annotated[int, Query(ge=1, le=METRICS_PAGE_LIMIT, description="Rows in this page.")] = 1000,
    ) -> Response:
        """One metrics row per line, oldest first, ``limit`` rows from ``offset``."""
        load(request, caller, experiment_id)
        client = redis(request)
        total = int(client.llen(_metrics_key(experiment_id)))
        rows = client.lrange(_metrics_key(experiment_id), offset, offset + limit - 1) if offset < total else []
        headers = {"X-Total-Rows": str(total)}
        if offset + len(rows) < total:
            following = offset + len(rows)
            headers["X-Next-Offset"] = str(following)
            headers["Link"] = f'<{request.url.path}?offset={following}&limit={limit}>; rel="next"'
        body = b"".join(json.dumps(json.loads(row), separators=(",", ":")).encode() + b"\n" for row in rows)
        return Response(body, media_type="application/x-ndjson", headers=headers)

    def report(request: Request, caller: str, experiment_id: str) -> tuple[bytes, bytes]:
        record = load(request, caller, experiment_id)
        rows = redis(request).lrange(_metrics_key(experiment_id), 0, -1)
        if not rows:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"experiment {experiment_id!r} has no metrics yet: no report")
        return renderer.render(experiment_id, record.name, rows)

    @router.get("/{experiment_id}/report.png", response_class=Response, responses={200: _PNG}, summary="Report curves (PNG)")
    def report_png(experiment_id: str, request: Request, caller: Caller) -> Response:
        """The report's curves, drawn from the metrics recorded so far."""
        return Response(report(request, caller, experiment_id)[0], media_type="image/png")

    @router.get("/{experiment_id}/report.md", response_class=Response, responses={200: _MARKDOWN}, summary="Report summary (Markdown)")
    def report_markdown(experiment_id: str, request: Request, caller: Caller) -> Response:
        """The report's summary table; it links the curves as ``report.png``."""
        return Response(report(request, caller, experiment_id)[1], media_type="text/markdown; charset=utf-8")

    @router.get("/{experiment_id}/logs", response_class=PlainTextResponse, summary="Log tail")
    def logs(
        experiment_id: str, request: Request, caller: Caller,
        component: Annotated[str, Query(description="run (the lecritique run console) or a service: orchestrator, rollout-0, ...")] = "run",
        tail: Annotated[int, Query(ge=1, le=100_000, description="Last lines to return.")] = 200,
    ) -> str:
        """The last ``tail`` lines of a local run's log (Kubernetes: ``kubectl logs``)."""
        record = load(request, caller, experiment_id)
        if "run_dir" not in record.handle:
            raise HTTPException(
                status.HTTP_501_NOT_IMPLEMENTED,
                f"logs of {record.launcher} experiments are not served: kubectl logs -l lecritique.dev/experiment={experiment_id}",
            )
        if not _COMPONENT.match(component):
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"component {component!r} is not a process name")
        run_dir = Path(record.handle["run_dir"])
        path = run_dir / "run.log" if component == "run" else run_dir / "run" / "logs" / f"{component}.log"
        if not path.is_file():
            known = sorted(p.stem for p in (run_dir / "run" / "logs").glob("*.log"))
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no log {component!r} (known: run, {', '.join(known)})")
        return _tail(path, tail)

    return router
