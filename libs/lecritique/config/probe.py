"""The Monte-Carlo probe's settings, said once, and the spec's ``critic_probe`` section.

A Monte-Carlo probe takes ``states`` states of a policy and plays ``continuations`` continuations
of the same policy from each: their returns are the states' true values and give the oracle
ceiling (:mod:`lecritique.critic_eval.ceiling`). :class:`MonteCarloProbe` declares those two
settings and :class:`FixedPolicyProbe` the two of a probe that draws its own episodes (``tasks``,
``group_size``); every place a probe is configured embeds one of them (no copies of the fields),
and each takes its defaults from this table, the one place they are chosen:

| context (model)                      | tasks | group_size | states | continuations |
|--------------------------------------|-------|------------|--------|---------------|
| ``critic_probe`` (``CriticProbeSpec``) | -     | -          | 32     | 8             |
| ``ceiling`` (the study's ``CeilingSpec``) | 32 | 2         | 128    | 16            |
| ``critic-eval`` (``CriticEvalSpec``) | 16    | 4          | 64     | 32            |
| ``study --quick`` (the study's ``QuickProfile``) | 4 | -     | 8      | 4             |

Why: the in-run probe is paid in policy time at every ``critic_probe.every`` steps, so it is the
smallest; the study's ceiling runs once per probed seed after the runs and needs many states for
its per-position buckets; critic-eval spends its continuations on values and the ranking probe.

The in-run probe has no ``tasks`` or ``group_size``: it plays groups of the run's own
``rollout.group_size`` (so a group-context critic sees groups as in the run) on
ceil(states / group_size) eval-split tasks. ``lecritique study --quick`` replaces the ceiling's
tasks (the row's), states and continuations (``quick.ceiling``: ``QuickCeiling``, this row's
model) and keeps its group size.
``tests/unit/architecture/test_said_once.py`` checks this table against the models and that no other
model declares the fields.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from pydantic import Field

from lecritique.config.base import SpecModel

PROBE_DEFAULTS: dict[str, dict[str, int]] = {
    "critic_probe": {"states": 32, "continuations": 8},
    "ceiling": {"tasks": 32, "group_size": 2, "states": 128, "continuations": 16},
    "critic-eval": {"tasks": 16, "group_size": 4, "states": 64, "continuations": 32},
    "study --quick": {"tasks": 4, "states": 8, "continuations": 4},
}
"""Each context's probe defaults (the module docstring's table)."""


class MonteCarloProbe(SpecModel):
    """States of a policy, each continued ``continuations`` times by the same policy.

    A subclass names its row of :data:`PROBE_DEFAULTS` in ``probe_context``; its fields take
    their defaults from there, the only ones they have (without a row, every field is required)."""

    probe_context: ClassVar[str | None] = None
    """The row of :data:`PROBE_DEFAULTS` this model's defaults come from (None: no defaults)."""

    states: int = Field(ge=2, le=100_000)
    """States probed: cut from the probe's episodes (>= 2: a ceiling is a variance over states)."""
    continuations: int = Field(ge=2, le=4_096)
    """K: Monte-Carlo continuations of the policy from each state (K >= 2 for the unbiased
    within-state variance); their mean return is the state's true value."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.probe_context is None:
            return
        defaults = PROBE_DEFAULTS[cls.probe_context]
        fields = dict(cls.__pydantic_fields__)
        for name, value in defaults.items():
            if name not in fields:  # a row may say more than a model has (the quick profile's tasks)
                continue
            # A copy: the parent's field keeps its own default.
            fields[name] = copy.copy(fields[name])
            fields[name].default = value
        cls.__pydantic_fields__ = fields
        cls.model_rebuild(force=True)

    def probe_settings(self) -> dict[str, int]:
        """The probe's own fields and their values (what a probe built from this one is given)."""
        own = FixedPolicyProbe if isinstance(self, FixedPolicyProbe) else MonteCarloProbe
        return {name: getattr(self, name) for name in own.model_fields}


class FixedPolicyProbe(MonteCarloProbe):
    """A probe of a fixed policy checkpoint: it plays its own episodes, ``group_size`` on each of
    ``tasks`` tasks, and cuts its states from them."""

    tasks: int = Field(ge=1)
    """Tasks the probe's episodes are played on."""
    group_size: int = Field(ge=1)
    """Episodes per task (the group peers a group-context critic sees)."""


class CriticProbeSpec(MonteCarloProbe):
    """Every ``every`` policy steps, ``states`` held-out states of the current policy, ``continuations`` each."""

    probe_context = "critic_probe"

    every: int = Field(default=25, ge=1, le=10_000_000)
    """Probe after every this many policy steps (after the step's weights are loaded)."""
    bootstrap: int = Field(default=200, ge=10, le=100_000)
    """Bootstrap resamples of the states for the standard errors."""
