"""Everything the platform says about a spec whose fields each validated: one list, every caller.

A finding names a field, a level and a text. Errors make the spec invalid (the spec's own
validator raises them, so no caller can start what they describe); warnings are what the spec
allows but will not do as it reads, or will do slowly. The callers show the same list:
``lecritique run`` prints the warnings before anything starts, the REST API returns them on
submit and keeps them on the experiment's record, ``lecritique study`` prints them once per
variant, and the orchestrator logs them and writes them into the first step's row.

Some refusals need more than the spec: a cluster (the chart's launcher defaults: a request above the
chart's limit, trainer processes that do not fill whole GPU nodes) refuses what a laptop runs. Such
a rule is a :class:`FindingContext`, passed to :func:`spec_findings`, and its findings carry the
context's name: the API's kubernetes launcher and ``lecritique chart render --experiment`` list the
same cluster findings from :class:`lecritique.launch.kubernetes.cluster_findings.ClusterFindings`,
every one at once rather than the first. A tenant's policy on the API is the ``tenant`` context
(:mod:`lecritique.launch.tenant_findings`: its allow-lists and quotas over the spec, then over what
the launcher would create), which ``lecritique chart render --experiment --tenant`` lists from the
chart's values as the API would answer. A context whose errors stop a render raises
:class:`SpecRefused`, which carries them.

Where the facts come from: the estimator's class (``uses_critic``, ``min_group_size``,
``ignored_values``), the critic kind's row in :mod:`lecritique.critics.kinds` (its refusals, its
hindsight), the replay arithmetic in :mod:`lecritique.config.critic_budget`. This module only
gathers them, so a new fact is declared where it belongs and every caller hears it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lecritique.config.critic_budget import budget_refusal, update_budget_findings
from lecritique.config.documents import SpecError
from lecritique.critics.kinds import critic_kind
from lecritique.critics.specs import TrainedCriticSpec
from lecritique.critics.types import GROUP_CONTEXT_KINDS
from lecritique.envs import environment_prompt_budget, environment_turn_limit


class ExperimentSpec(Protocol):
    """What the rules read of :class:`lecritique.config.experiment.ExperimentSpec` (whose validator
    calls them, so this module cannot import it)."""

    estimator: Any
    environment: Any
    rollout: Any
    critic: Any
    critic_probe: Any
    policy_trainer: Any
    orchestrator: Any

    @property
    def batch_size(self) -> int: ...

    @property
    def critic_batch_size(self) -> int: ...


Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    field: str
    """Dotted path of the field the finding is about (``critic.updates_per_step``)."""
    level: Level
    """``error``: the spec is refused; ``warning``: it runs, and the text says what to expect."""
    text: str
    """What is wrong or marginal and what to change (names the fields it involves)."""
    context: str = "spec"
    """Whose rule found it: ``spec`` (the spec alone, everywhere), or a :class:`FindingContext`'s
    name (``cluster``: the chart's launcher defaults; ``tenant``: the tenant's policy on the API)."""
    kind: str = ""
    """What kind of refusal, where a context tells them apart: a tenant's ``forbidden`` (an
    allow-list refuses it; the API answers 403) or ``limit`` (a quota; 422). Empty elsewhere."""

    def __str__(self) -> str:
        return self.text


class FindingContext(Protocol):
    """Rules that need more than the spec (a cluster's defaults); their findings name the context."""

    @property
    def name(self) -> str: ...

    def findings(self, spec: Any) -> list[Finding]: ...


class SpecRefused(SpecError):
    """A spec refused by the errors among ``findings`` (every one, not the first); the message is
    their texts, one per line."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = [finding for finding in findings if finding.level == "error"]
        if not self.findings:
            raise ValueError("SpecRefused needs at least one error finding")
        super().__init__("\n".join(finding.text for finding in self.findings))


def spec_findings(spec: ExperimentSpec, contexts: Sequence[FindingContext] = ()) -> list[Finding]:
    """Every finding about ``spec`` (and each context's), errors first: each rule in the order a
    reader meets its field, the spec's own before the contexts'."""
    found = [finding for rule in _RULES for finding in rule(spec)]
    found += [finding for context in contexts for finding in context.findings(spec)]
    return [f for f in found if f.level == "error"] + [f for f in found if f.level == "warning"]


def errors(spec: ExperimentSpec, contexts: Sequence[FindingContext] = ()) -> list[Finding]:
    return [finding for finding in spec_findings(spec, contexts) if finding.level == "error"]


def warnings(spec: ExperimentSpec, contexts: Sequence[FindingContext] = ()) -> list[Finding]:
    return [finding for finding in spec_findings(spec, contexts) if finding.level == "warning"]


def warning_texts(spec: ExperimentSpec) -> list[str]:
    """The warnings as the callers print and record them."""
    return [finding.text for finding in warnings(spec)]


def _estimator_needs(spec: ExperimentSpec) -> list[Finding]:
    estimator = spec.estimator.estimator_class()
    found = []
    if estimator.uses_critic and spec.critic is None:
        found.append(
            Finding(
                "critic",
                "error",
                f"estimator {spec.estimator.name!r} needs a critic: add a 'critic' section",
            )
        )
    group_size = spec.rollout.group_size
    if group_size < estimator.min_group_size:
        found.append(
            Finding(
                "rollout.group_size",
                "error",
                f"rollout.group_size must be >= {estimator.min_group_size} with estimator.name "
                f"{spec.estimator.name!r}: with {group_size} the run trains nothing, {estimator.group_reason}",
            )
        )
    return found


def _room_for_a_response(spec: ExperimentSpec) -> list[Finding]:
    """An engine whose context cannot hold a prompt and one action ends every episode at once (reward 0)."""
    rollout, environment = spec.rollout, spec.environment
    engine = rollout.engine
    if engine.kind != "vllm":
        return []  # the HF engine's context is the model's own, known only once it is loaded
    needed = environment_prompt_budget(environment) + rollout.sampling.max_tokens
    if engine.max_model_len >= needed:
        return []
    return [
        Finding(
            "rollout.engine.max_model_len",
            "error",
            f"rollout.engine.max_model_len ({engine.max_model_len}) leaves no room for a response: it must hold "
            f"the {environment.kind} prompt budget ({needed - rollout.sampling.max_tokens} tokens) plus "
            f"rollout.sampling.max_tokens ({rollout.sampling.max_tokens}), i.e. be at least {needed}; "
            "else every episode ends before its first action with reward 0",
        )
    ]


def _estimator_ignores_critic(spec: ExperimentSpec) -> list[Finding]:
    """An estimator that reads none of the critic's values on this task (LVRL on a single-turn one)."""
    if spec.critic is None:
        return []
    reason = spec.estimator.estimator_class().ignored_values(environment_turn_limit(spec.environment))
    return [] if reason is None else [Finding("estimator.name", "warning", reason)]


def _group_context(spec: ExperimentSpec) -> list[Finding]:
    critic, group_size = spec.critic, spec.rollout.group_size
    if critic is None or critic.context not in GROUP_CONTEXT_KINDS or group_size >= 2:
        return []
    return [
        Finding(
            "rollout.group_size",
            "error",
            f"rollout.group_size must be >= 2 with critic.context {critic.context!r}: the context shows "
            f"the critic the group's other members, and a group of {group_size} has none",
        )
    ]


def _needs_a_critic_or_engine(spec: ExperimentSpec) -> list[Finding]:
    found = []
    distillation = spec.policy_trainer.distillation
    if distillation is not None and distillation.gate == "value_decrease" and spec.critic is None:
        found.append(
            Finding(
                "policy_trainer.distillation.gate",
                "error",
                "policy_trainer.distillation.gate 'value_decrease' needs a critic: add a 'critic' section",
            )
        )
    if spec.policy_trainer.weight_transport.kind == "broadcast" and spec.rollout.engine.kind != "hf":
        found.append(
            Finding(
                "policy_trainer.weight_transport",
                "error",
                "policy_trainer.weight_transport 'broadcast' needs rollout.engine.kind 'hf' (vLLM loads from the volume)",
            )
        )
    if spec.critic_probe is not None and (
        spec.critic is None or critic_kind(spec.critic).hindsight(spec.critic)
    ):
        found.append(
            Finding(
                "critic_probe",
                "error",
                "critic_probe: needs a critic that scores each state from its prefix (add a 'critic' section; "
                "a frozen_llm critic needs critic.hindsight: false)",
            )
        )
    return found


def _critic_kind(spec: ExperimentSpec) -> list[Finding]:
    if spec.critic is None:
        return []
    refusal = critic_kind(spec.critic).refusal(spec.critic, spec.estimator.estimator_class())
    return [] if refusal is None else [Finding("critic", "error", refusal)]


def _critic_budget(spec: ExperimentSpec) -> list[Finding]:
    critic = spec.critic
    if not isinstance(critic, TrainedCriticSpec):  # a critic that is never trained reads no batches
        return []
    if spec.critic_batch_size > critic.replay.capacity:
        # The value trainer could never fill a batch: warmup would wait forever.
        return [
            Finding(
                "critic.replay.capacity",
                "error",
                f"critic batch ({spec.critic_batch_size} trajectories) exceeds critic.replay.capacity "
                f"({critic.replay.capacity}); raise the capacity or set critic.batch_size",
            )
        ]
    refusal = budget_refusal(spec)
    if refusal is not None:
        return [Finding("critic.updates_per_step", "error", refusal)]
    return [Finding(field, "warning", text) for field, text in update_budget_findings(spec)]


def _schedules(spec: ExperimentSpec) -> list[Finding]:
    """Periodic work that a run this short never reaches."""
    steps, found = spec.orchestrator.steps, []
    every = spec.orchestrator.eval_every
    if every is not None and every > steps:
        found.append(
            Finding(
                "orchestrator.eval_every",
                "warning",
                f"orchestrator.eval_every = {every} > orchestrator.steps = {steps}: the held-out evaluation "
                "runs only on the initial policy (step 0) and after the last step",
            )
        )
    probe = spec.critic_probe
    if probe is not None and probe.every > steps:
        found.append(
            Finding(
                "critic_probe.every",
                "warning",
                f"critic_probe.every = {probe.every} > orchestrator.steps = {steps}: the critic is never probed",
            )
        )
    return found


_RULES: tuple[Callable[[ExperimentSpec], list[Finding]], ...] = (
    _estimator_needs,
    _room_for_a_response,
    _group_context,
    _needs_a_critic_or_engine,
    _critic_kind,
    _critic_budget,
    _estimator_ignores_critic,
    _schedules,
)
