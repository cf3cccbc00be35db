"""The OpenAPI document: the experiment spec as the POST body, every error status, stateful links.

The POST route reads its body itself (to bound its size and depth and to name fields in errors),
so FastAPI cannot infer the request body: it is declared here from :class:`ExperimentSpec`'s own
JSON schema, whose definitions join the document's components.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from lecritique.config.experiment import ExperimentSpec
from services.api.schemas import ErrorResponse

ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "string"}}
}


def error(description: str, **headers: dict[str, Any]) -> dict[str, Any]:
    """A documented error response (its body is an ErrorResponse)."""
    response: dict[str, Any] = {"description": description, "model": ErrorResponse}
    if headers:
        response["headers"] = headers
    return response


UNAUTHORIZED = error(
    "No bearer token, or one that belongs to no tenant.",
    **{"WWW-Authenticate": {"description": "Bearer realm.", "schema": {"type": "string"}}},
)
UNAVAILABLE = error("The record store (Redis) is unreachable; retry after the given seconds.", **RETRY_AFTER)
NOT_FOUND = error("No such experiment among the caller's (another tenant's experiment is not found either).")
INVALID = error("Invalid request: every offending field is named, and the limit where one was exceeded.")

SUBMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    201: {
        "description": "Created (or, with a replayed Idempotency-Key, the experiment the first request created).",
        "headers": {"Location": {"description": "URL of the experiment.", "schema": {"type": "string"}}},
        "links": {
            "GetExperiment": {
                "operationId": "get_experiment",
                "parameters": {"experiment_id": "$response.body#/id"},
            },
            "GetMetrics": {
                "operationId": "get_metrics",
                "parameters": {"experiment_id": "$response.body#/id"},
            },
            "GetMetricsLines": {
                "operationId": "get_metrics_lines",
                "parameters": {"experiment_id": "$response.body#/id"},
            },
            "GetReportMarkdown": {
                "operationId": "get_report_markdown",
                "parameters": {"experiment_id": "$response.body#/id"},
            },
            "GetLogs": {"operationId": "get_logs", "parameters": {"experiment_id": "$response.body#/id"}},
            "CancelExperiment": {
                "operationId": "cancel_experiment",
                "parameters": {"experiment_id": "$response.body#/id"},
            },
        },
    },
    401: UNAUTHORIZED,
    403: error(
        "The spec names a Secret, model path, endpoint or variable the tenant's policy does not allow."
    ),
    413: error("The request body is larger than the configured limit."),
    422: INVALID,
    429: error("The tenant already runs as many experiments as its policy allows.", **RETRY_AFTER),
    503: UNAVAILABLE,
}
READ_RESPONSES: dict[int | str, dict[str, Any]] = {401: UNAUTHORIZED, 404: NOT_FOUND, 503: UNAVAILABLE}


EXAMPLE_SPEC = {
    "name": "sudoku-mini",
    "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
    "policy": {"tiny": "sudoku-mini"},
    "estimator": {"name": "tether"},
    "critic": {"kind": "discriminative", "context": "reference"},
    "orchestrator": {"steps": 100},
}
"""A small valid spec (a tiny CPU policy, TETHER over a privileged critic); fuzzers start from it."""


def submit_request_body() -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": "The experiment spec (the same document `lecritique run` reads), as JSON or "
            "as YAML (application/yaml, application/x-yaml, text/yaml).",
            "content": {
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/ExperimentSpec"},
                    "examples": {
                        "tiny-sudoku": {
                            "summary": "TETHER with a privileged critic on 4x4 Sudoku",
                            "value": EXAMPLE_SPEC,
                        }
                    },
                },
                "application/yaml": {"schema": {"$ref": "#/components/schemas/ExperimentSpec"}},
            },
        }
    }


def _drop_unused_validation_error(document: dict[str, Any]) -> None:
    """FastAPI documents a 422 for every route with a path parameter; the API answers an unknown
    id with 404, never 422, so that default is removed where a route does not declare its own."""
    for operations in document["paths"].values():
        for operation in operations.values():
            invalid = operation.get("responses", {}).get("422", {})
            if "HTTPValidationError" in str(invalid):
                del operation["responses"]["422"]
    schemas = document["components"]["schemas"]
    if "HTTPValidationError" not in str(document["paths"]):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)


def install_openapi(app: FastAPI) -> None:
    """Generate the document once, adding the spec's schema to the components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        spec_schema = ExperimentSpec.model_json_schema(ref_template="#/components/schemas/{model}")
        components = document.setdefault("components", {}).setdefault("schemas", {})
        definitions = spec_schema.pop("$defs", {})
        clashes = set(definitions) & set(components)
        if clashes:
            raise RuntimeError(f"spec schema names clash with API schemas: {sorted(clashes)}")
        components.update(definitions)
        components["ExperimentSpec"] = spec_schema
        _drop_unused_validation_error(document)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
