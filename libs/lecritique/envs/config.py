"""The shared base of every environment's pydantic configuration."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EnvironmentConfigBase(BaseModel):
    """Fields every environment accepts; subclasses add ``kind`` and their own settings."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    eval_fraction: float = Field(default=0.1, gt=0.0, lt=1.0)
    """Share of the task space (by a hash of each task's canonical content) reserved for the eval split."""
