"""Response bodies of the REST API (they make the OpenAPI document at /docs); the experiment's view
is the client's own model (``lecritique.client.models.ExperimentView``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from lecritique.client.models import ExperimentView

__all__ = ["ErrorDetail", "ExperimentList", "ExperimentView", "MetricsSeries"]


class ExperimentList(BaseModel):
    experiments: list[ExperimentView]
    """Newest first."""


class MetricsSeries(BaseModel):
    experiment_id: str
    """Whose metrics these are."""
    rows: list[dict[str, Any]]
    """One row per policy step (``step``, ``reward_mean``, ``value_explained_variance``, ``tether_rho``, ...)."""
    skipped_rows: int = 0
    """Rows of the series that were not JSON objects with an integer ``step`` (skipped, not returned)."""


class ErrorDetail(BaseModel):
    field: str
    """Dotted path of the offending field (``critic.replay.capacity``), or what the error is about
    (``body``, ``Authorization``, ``Idempotency-Key``, ``experiment_id``, ``experiments running``, ``redis``)."""
    message: str
    """What is wrong (at most 500 characters: submitted values are never echoed at length)."""
    type: str
    """Error kind (``missing``, ``extra_forbidden``, ``policy_denied``, ``quota_exceeded``, ``not_found``, ...)."""


class ErrorResponse(BaseModel):
    """The body of every error response (4xx and 503)."""

    detail: list[ErrorDetail]
    """Every problem found (at most 50)."""
