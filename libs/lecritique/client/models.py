"""What the client returns: typed views of the API's JSON (unknown fields are kept)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Status = Literal["pending", "running", "cancelling", "succeeded", "failed", "cancelled"]
"""Every status an experiment can have; the API's records and this view share it."""
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})


class ExperimentFields(BaseModel):
    """What the API both stores of an experiment (its record, ``services/api/records.py``) and shows
    its tenant (:class:`ExperimentView`): declared once, so the record and the view cannot drift."""

    model_config = ConfigDict(use_attribute_docstrings=True)

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


class ExperimentView(ExperimentFields):
    """One experiment as the REST API answers it: the server's response model (its OpenAPI schema)
    and the client's view are this one class, so the two cannot drift apart."""

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


class Experiment(ExperimentView):
    """One experiment as the client returns it (fields a newer server adds are kept)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATES
