"""The spec's ``critic_probe`` section: the critic against the Monte-Carlo ceiling, during the run."""

from __future__ import annotations

from pydantic import Field

from lecritique.config.base import SpecModel


class CriticProbeSpec(SpecModel):
    """Every ``every`` policy steps, ``states`` held-out states of the current policy, ``continuations`` each."""

    every: int = Field(default=25, ge=1, le=10_000_000)
    """Probe after every this many policy steps (after the step's weights are loaded)."""
    states: int = Field(default=32, ge=2, le=100_000)
    """States probed: one random response position of each of this many eval-split episodes."""
    continuations: int = Field(default=8, ge=2, le=4_096)
    """Monte-Carlo continuations of the current policy from each state (K >= 2 for the variance terms)."""
    bootstrap: int = Field(default=200, ge=10, le=100_000)
    """Bootstrap resamples of the states for the standard errors."""
