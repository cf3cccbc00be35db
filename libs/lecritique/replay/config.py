"""Typed settings of the replay buffer."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lecritique.redis_connection import RetryPolicy

# Experiment names become part of Redis keys; keep them free of ':' and glob characters.
_EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class ReplayBounds(BaseModel):
    """What the critic's replay buffer keeps (Le Critique Appendix B.2); the spec's ``critic.replay``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    capacity: int = Field(default=256, ge=1, le=10_000_000)
    """FIFO capacity in trajectories: pushing beyond it evicts the oldest (Le Critique Table 2: 256)."""
    max_reuse: int = Field(default=2, ge=1, le=1_000_000_000)
    """Evict a trajectory the moment this many critic batches have sampled it (Table 2: N = 2)."""
    max_age_versions: int | None = Field(default=None, ge=0, le=10_000_000)
    """Never train the critic on trajectories older than this many policy versions, i.e. with
    ``current_policy_version - policy_version`` above it (None: no bound)."""


class ReplayConfig(ReplayBounds):
    """Semantics of one experiment's replay buffer: its bounds, its keys and its limits."""

    experiment: str
    """Experiment name; keys live under ``lecritique:{experiment}:replay``."""
    max_payload_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    """Largest accepted payload; bigger ones are rejected before anything is written."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Reconnect policy for every Redis call the buffer makes."""

    @field_validator("experiment")
    @classmethod
    def _experiment_is_key_safe(cls, value: str) -> str:
        if not _EXPERIMENT_NAME.match(value):
            raise ValueError(
                f"experiment name {value!r} must be 1-128 characters of letters, digits, '_', '.', '-' "
                "(it becomes part of Redis keys)"
            )
        return value
