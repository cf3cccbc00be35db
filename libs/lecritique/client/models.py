"""What the client returns: typed views of the API's JSON (unknown fields are kept)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

FINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


class Experiment(BaseModel):
    """One experiment as the API reports it."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    id: str
    """Experiment id."""
    name: str
    """The spec's name."""
    tenant: str
    """Owner."""
    status: str
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
    """What the API's check of the spec found marginal but allowed."""
    step: int | None = None
    """Last completed policy step."""
    policy_version: int | None = None
    """Policy weight version in rollout."""
    value_version: int | None = None
    """Critic version of the last policy batch."""
    latest_metrics: dict[str, Any] | None = None
    """The last metrics row."""
    spec: dict[str, Any] | None = None
    """The validated spec (``get`` only)."""

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATES
