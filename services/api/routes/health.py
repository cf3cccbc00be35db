"""Liveness, readiness and Prometheus metrics (no token: probes and scrapers call them)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

router = APIRouter()


@router.get("/healthz", response_class=PlainTextResponse, summary="Liveness", operation_id="healthz")
async def healthz() -> str:
    """Answered on the event loop itself: no worker thread, however busy, delays it."""
    return "ok"


@router.get(
    "/readyz",
    response_class=PlainTextResponse,
    summary="Readiness (Redis reachable)",
    operation_id="readyz",
    responses={
        503: {
            "description": "Redis is unreachable.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def readyz(request: Request) -> Response:
    try:
        request.app.state.redis.ping()
    except Exception as error:
        # The error names host and port at most (redis-py never puts the password in it).
        return PlainTextResponse(
            f"redis unavailable: {type(error).__name__}", status_code=status.HTTP_503_SERVICE_UNAVAILABLE
        )
    return PlainTextResponse("ok")


@router.get("/metrics", include_in_schema=False)
def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
