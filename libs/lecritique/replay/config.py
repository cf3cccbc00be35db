"""Typed settings of the replay buffer and of its Redis reconnect policy."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Experiment names become part of Redis keys; keep them free of ':' and glob characters.
_EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class RetryPolicy(BaseModel):
    """How long a Redis call keeps reconnecting before it gives up with a clear error."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=12, ge=1)
    """Attempts per operation, the first included (1: fail on the first connection error)."""
    initial_backoff_s: float = Field(default=0.05, ge=0.0)
    """Wait before the second attempt."""
    max_backoff_s: float = Field(default=5.0, ge=0.0)
    """Upper bound of one wait between attempts."""
    multiplier: float = Field(default=2.0, ge=1.0)
    """Factor applied to the wait after every failed attempt (exponential backoff)."""

    def delays(self) -> list[float]:
        """The waits between consecutive attempts (``max_attempts - 1`` of them)."""
        delays: list[float] = []
        delay = self.initial_backoff_s
        for _ in range(self.max_attempts - 1):
            delays.append(min(delay, self.max_backoff_s))
            delay *= self.multiplier
        return delays


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
