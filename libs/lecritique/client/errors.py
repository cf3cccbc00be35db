"""Errors of the REST client, one per answer a caller handles differently, each with a clear message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ApiError(Exception):
    """The API answered with an error (or could not be reached)."""

    status: int | None = None

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Unauthorized(ApiError):
    """401: no token, or a token the API does not know."""


class Forbidden(ApiError):
    """403: the spec names something the tenant's policy does not allow."""


class NotFound(ApiError):
    """404: no such experiment (or nothing of that kind yet, e.g. a report before the first step)."""


@dataclass(frozen=True)
class FieldProblem:
    field: str
    """Dotted path of the offending field (``critic.replay.capacity``)."""
    message: str
    """What is wrong with it."""


class InvalidSpec(ApiError):
    """422: the spec (or a parameter) is invalid; ``problems`` names every field and the reason."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        lines = "\n".join(f"  {p.field}: {p.message}" for p in problems)
        super().__init__(f"the API rejected the request:\n{lines}", 422)
        self.problems = problems


class Unavailable(ApiError):
    """503 (or no connection) after every retry."""


def field_problems(body: Any) -> list[FieldProblem]:
    """The API's 422 body (``{"detail": [{"field", "message"}]}`` or FastAPI's ``{"detail": [{"loc", "msg"}]}``)."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return [FieldProblem("request", detail)]
    problems = []
    for item in detail if isinstance(detail, list) else []:
        if not isinstance(item, dict):
            continue
        if "field" in item:
            problems.append(FieldProblem(str(item["field"]), str(item.get("message", ""))))
        else:
            location = ".".join(
                str(part) for part in item.get("loc", []) if part not in ("body", "query", "path")
            )
            problems.append(FieldProblem(location or "request", str(item.get("msg", ""))))
    return problems or [FieldProblem("request", str(body))]
