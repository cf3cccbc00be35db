"""Response bodies of the REST API (they make the OpenAPI document at /docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from services.api.records import Status


class ExperimentView(BaseModel):
    id: str
    """Experiment id (``exp-`` and 10 hex digits)."""
    name: str
    """The spec's name."""
    tenant: str
    """Owner."""
    status: Status
    """pending, running, cancelling, succeeded, failed or cancelled."""
    launcher: str
    """local or kubernetes."""
    created_at: float
    """Submission time (Unix seconds)."""
    updated_at: float
    """Last status change (Unix seconds)."""
    error: str | None = None
    """Why it failed."""
    warnings: list[str] = []
    """What the spec's check found marginal but allowed at submission (e.g. a critic budget some steps may miss)."""
    step: int | None = None
    """Last completed policy step (None before the first)."""
    policy_version: int | None = None
    """Policy weight version in rollout."""
    value_version: int | None = None
    """Critic version used by the last policy batch."""
    latest_metrics: dict[str, Any] | None = None
    """The last metrics row the orchestrator recorded."""
    spec: dict[str, Any] | None = None
    """The validated spec with defaults filled in (GET of one experiment only)."""


class ExperimentList(BaseModel):
    experiments: list[ExperimentView]
    """Newest first."""


class MetricsSeries(BaseModel):
    experiment_id: str
    """Whose metrics these are."""
    rows: list[dict[str, Any]]
    """One row per policy step (``step``, ``reward_mean``, ``value_explained_variance``, ``tether_rho``, ...)."""


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
