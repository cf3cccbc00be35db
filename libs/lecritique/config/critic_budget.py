"""``critic.updates_per_step`` against what the replay can feed it: the texts of the refusal and
the warnings that :mod:`lecritique.config.findings` gives.

The arithmetic is :func:`lecritique.replay.budget.update_budget`'s; this module names the spec's
fields in what it says (``docs/critics.md``, "Critic budget").
"""

from __future__ import annotations

from typing import Any, Protocol

from lecritique.critics.specs import TrainedCriticSpec
from lecritique.replay.budget import UpdateBudget, update_budget


class ExperimentSpec(Protocol):
    """What the check reads of :class:`lecritique.config.experiment.ExperimentSpec` (which calls it)."""

    @property
    def critic(self) -> Any: ...

    @property
    def orchestrator(self) -> Any: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def critic_batch_size(self) -> int: ...


def spec_update_budget(spec: ExperimentSpec) -> UpdateBudget | None:
    """The update budget of the spec's trained critic (None: no trained critic)."""
    critic = spec.critic
    if not isinstance(critic, TrainedCriticSpec):
        return None
    return update_budget(
        spec.batch_size, spec.critic_batch_size, critic.replay.max_reuse, critic.replay.capacity
    )


def _settings(spec: ExperimentSpec, budget: UpdateBudget) -> str:
    assert isinstance(spec.critic, TrainedCriticSpec)
    replay = spec.critic.replay
    return (
        f"rollout.tasks_per_step x rollout.group_size = {spec.batch_size} new trajectories per step "
        f"(critic.replay.capacity = {replay.capacity} keeps {budget.fresh}), each sampled at most "
        f"critic.replay.max_reuse = {replay.max_reuse} times, critic.batch_size = {spec.critic_batch_size} "
        f"per update: {budget.fresh} x {replay.max_reuse} / {spec.critic_batch_size} = {budget.nominal} updates per step"
    )


def budget_refusal(spec: ExperimentSpec) -> str | None:
    """Why a ``critic.updates_per_step`` the replay can never feed is refused (the run would wait on
    every step); None when it can be fed."""
    budget = spec_update_budget(spec)
    if budget is None or not isinstance(spec.critic, TrainedCriticSpec):
        return None
    wanted = spec.critic.updates_per_step
    if wanted <= budget.nominal:
        return None
    return (
        f"critic.updates_per_step = {wanted} cannot be met: {_settings(spec, budget)}. Lower "
        "critic.updates_per_step, or raise critic.replay.max_reuse, rollout.tasks_per_step or "
        "rollout.group_size, or lower critic.batch_size"
    )


def update_budget_findings(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """(field, text) of what makes a valid ``critic.updates_per_step`` marginal: steps that will wait
    past it or fall short (:mod:`lecritique.config.findings` makes them warnings)."""
    budget = spec_update_budget(spec)
    critic = spec.critic
    if budget is None or not isinstance(critic, TrainedCriticSpec) or critic.updates_per_step == 0:
        return []
    wanted = critic.updates_per_step
    found = []
    if wanted > budget.guaranteed:
        found.append(
            (
                "critic.updates_per_step",
                f"critic.updates_per_step = {wanted} is marginal: {_settings(spec, budget)} on average, but only "
                f"{budget.guaranteed} whatever order uniform sampling takes entries in; steps whose fresh data run "
                "out early wait for leftovers or the next push (raise critic.replay.max_reuse or lower critic.batch_size)",
            )
        )
    age = critic.replay.max_age_versions
    if age is not None and age < spec.orchestrator.prefetch_batches + 1:
        found.append(
            (
                "critic.replay.max_age_versions",
                f"critic.replay.max_age_versions = {age} < orchestrator.prefetch_batches + 1 = "
                f"{spec.orchestrator.prefetch_batches + 1}: a step's trajectories may age out before they feed "
                f"critic.updates_per_step = {wanted} updates",
            )
        )
    return found
