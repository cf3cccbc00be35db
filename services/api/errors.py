"""Errors of the REST API and how each becomes a response; every error body is an ErrorResponse.

What a client submitted is echoed only in bounded form: each message and field path is cut to a
few hundred characters and at most :data:`MAX_ERRORS` problems are listed, so a 10 MB name or a
body with a million unknown keys does not come back whole. No message names a folder of the API's
host that the tenant does not write itself (:class:`~lecritique.launch.host_paths.HostPaths`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import redis
from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lecritique.launch.host_paths import HostPaths
from services.api.experiments import FieldError, InvalidSpec, NotFound, PolicyDenied
from services.api.records import IdempotencyConflict, QuotaExceeded
from services.api.schemas import ErrorDetail, ErrorResponse

logger = logging.getLogger(__name__)

MAX_ERRORS = 50
MAX_MESSAGE_CHARS = 500
MAX_FIELD_CHARS = 200
REDIS_RETRY_AFTER_SECONDS = 5
QUOTA_RETRY_AFTER_SECONDS = 60
UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="lecritique"'}


class Unauthorized(Exception):
    """No bearer token, or one that belongs to no tenant."""


class BodyTooLarge(Exception):
    """The request body is larger than ``max_body_bytes``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body exceeds {limit} bytes")
        self.limit = limit


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def host_paths(request: Request) -> HostPaths:
    """The API's named and kept folders (set by ``create_app``; none for an application built without them)."""
    paths: HostPaths = getattr(request.app.state, "host_paths", HostPaths())
    return paths


def error_response(
    code: int,
    errors: Iterable[FieldError],
    headers: dict[str, str] | None = None,
    paths: HostPaths | None = None,
) -> JSONResponse:
    """An ErrorResponse with bounded echoes and no host folder (``paths``)."""
    items = list(errors)
    hide = (paths or HostPaths()).hide
    details = [
        ErrorDetail(
            field=_cut(e.field, MAX_FIELD_CHARS),
            message=_cut(hide(e.message), MAX_MESSAGE_CHARS),
            type=_cut(e.type, 64),
        )
        for e in items[:MAX_ERRORS]
    ]
    if len(items) > MAX_ERRORS:
        details.append(
            ErrorDetail(
                field="spec", message=f"{len(items) - MAX_ERRORS} more problems not listed", type="truncated"
            )
        )
    return JSONResponse(status_code=code, content=ErrorResponse(detail=details).model_dump(), headers=headers)


def _request_errors(error: RequestValidationError) -> list[FieldError]:
    """FastAPI's parameter errors (query, header) in the API's own shape."""
    out = []
    for item in error.errors():
        location = [
            str(part) for part in item.get("loc", ()) if part not in ("query", "header", "path", "body")
        ]
        out.append(
            FieldError(
                ".".join(location) or "request",
                str(item.get("msg", "invalid")),
                str(item.get("type", "value_error")),
            )
        )
    return out


async def redis_unavailable(request: Request, error: Exception) -> JSONResponse:
    """503 with Retry-After for any Redis error: unreachable, timed out, loading, or refusing (an
    ACL or script error), the store cannot serve this request now; the client may retry, the log
    says why."""
    logger.warning(
        "Redis unavailable during %s %s: %s: %s",
        request.method,
        request.url.path,
        type(error).__name__,
        error,
    )
    return error_response(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        [FieldError("redis", "the record store is unavailable; retry later", "unavailable")],
        headers={"Retry-After": str(REDIS_RETRY_AFTER_SECONDS)},
    )


async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """FastAPI's and the routes' HTTPExceptions (a missing log, a bad component name) as ErrorResponses."""
    return error_response(
        error.status_code,
        [FieldError("request", str(error.detail), "http_error")],
        headers=error.headers,
        paths=host_paths(request),
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map every error the routes raise (and Redis outages) to its status code."""

    @app.exception_handler(PolicyDenied)
    async def policy_denied(request: Request, error: PolicyDenied) -> JSONResponse:
        return error_response(status.HTTP_403_FORBIDDEN, error.errors, paths=host_paths(request))

    @app.exception_handler(InvalidSpec)
    async def invalid_spec(request: Request, error: InvalidSpec) -> JSONResponse:
        return error_response(status.HTTP_422_UNPROCESSABLE_CONTENT, error.errors, paths=host_paths(request))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return error_response(
            status.HTTP_422_UNPROCESSABLE_CONTENT, _request_errors(error), paths=host_paths(request)
        )

    @app.exception_handler(IdempotencyConflict)
    async def idempotency_conflict(request: Request, error: IdempotencyConflict) -> JSONResponse:
        message = "this Idempotency-Key was already used with a different request body"
        return error_response(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [FieldError("Idempotency-Key", message, "idempotency_conflict")],
        )

    @app.exception_handler(QuotaExceeded)
    async def quota_exceeded(request: Request, error: QuotaExceeded) -> JSONResponse:
        return error_response(
            status.HTTP_429_TOO_MANY_REQUESTS,
            [FieldError("experiments running", str(error), "quota_exceeded")],
            headers={"Retry-After": str(QUOTA_RETRY_AFTER_SECONDS)},
        )

    @app.exception_handler(NotFound)
    async def not_found(request: Request, error: NotFound) -> JSONResponse:
        return error_response(
            status.HTTP_404_NOT_FOUND, [FieldError("experiment_id", "no such experiment", "not_found")]
        )

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, error: Unauthorized) -> JSONResponse:
        return error_response(
            status.HTTP_401_UNAUTHORIZED,
            [FieldError("Authorization", str(error), "unauthorized")],
            headers=UNAUTHORIZED_HEADERS,
        )

    @app.exception_handler(BodyTooLarge)
    async def body_too_large(request: Request, error: BodyTooLarge) -> JSONResponse:
        return error_response(
            status.HTTP_413_CONTENT_TOO_LARGE, [FieldError("body", str(error), "too_large")]
        )

    app.add_exception_handler(redis.RedisError, redis_unavailable)
    app.add_exception_handler(StarletteHTTPException, http_error)
