"""How much one experiment of a tenant may take: replicas, steps, work sizes, GPUs, CPU and memory.

Each refusal is a :class:`~lecritique.tenancy.policy.Violation` of kind ``limit`` (422) naming the
field, the limit and the policy key that raises it. Sizes are read from the dumped spec
(``spec.model_dump(mode="json")``); GPUs, CPU and memory from what the launcher would create
(:func:`resource_violations`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from lecritique.tenancy.generator_config import generator_violations
from lecritique.tenancy.policy import TenantPolicy, Violation, raised_with
from lecritique.tenancy.work import ONE_TURN, Sizes, generation_per_step, replay_memory

CRITIC_PARAMETERS_PER_LAYER_WIDTH = 16
"""Parameters of one Llama decoder layer per hidden width squared: attention 4 h^2 (as many key and
value heads as query heads), MLP 3 x h x 4h (the tiny architecture's 4x MLP)."""
GIB = Decimal(2**30)


def _over(field: str, what: str, limit: Any, key: str) -> Violation:
    return Violation(field, f"{what} exceeds this tenant's limit of {limit}; {raised_with(key)}", "limit")


def _replica_fields(data: dict[str, Any]) -> list[tuple[str, int]]:
    critic = data.get("critic") or {}
    placed = (data.get("placement") or {}).get("environment_verifier") or {}
    found = [
        ("rollout.replicas", data.get("rollout", {}).get("replicas")),
        ("critic.evaluator_replicas", critic.get("evaluator_replicas")),
        ("placement.environment_verifier.replicas", placed.get("replicas")),
        ("policy_trainer.processes", data.get("policy_trainer", {}).get("processes")),
        ("critic.processes", critic.get("processes")),
    ]
    return [(field, int(value)) for field, value in found if isinstance(value, int)]


def _critic_violations(critic: dict[str, Any], policy: TenantPolicy) -> list[Violation]:
    tiny = critic.get("tiny")
    if not isinstance(tiny, dict):
        return []  # the policy's own shape: the tenant could load that model anyway
    layers: Any = tiny.get("layers")
    hidden: Any = tiny.get("hidden")
    limit = policy.max_critic_parameters
    for name, value in (("hidden", hidden), ("layers", layers)):
        if value is None:
            return [
                Violation(
                    f"critic.tiny.{name}",
                    f"unset, it is the policy's, which the API does not read: give critic.tiny.{name} (the "
                    f"policy's own value) so that the critic's size can be checked against this tenant's limit "
                    f"of {limit} parameters (maxCriticParameters in the tenant's policy)",
                    "limit",
                )
            ]
    parameters = int(layers) * CRITIC_PARAMETERS_PER_LAYER_WIDTH * int(hidden) ** 2
    if parameters <= limit:
        return []
    what = (
        f"layers {layers} x {CRITIC_PARAMETERS_PER_LAYER_WIDTH} x hidden {hidden}^2 = {parameters} parameters"
    )
    return [_over("critic.tiny", what, limit, "maxCriticParameters")]


def _generation_violations(data: dict[str, Any], policy: TenantPolicy, sizes: Sizes) -> list[Violation]:
    """Tokens per step of every model that generates (:mod:`lecritique.tenancy.work`): one refusal per
    model over the limit, else one naming the sum when together they are."""
    limit = policy.max_tokens_per_step
    models = generation_per_step(data, sizes)
    found = [
        _over(model.field, f"{model.what} = {model.tokens} tokens per step", limit, "maxTokensPerStep")
        for model in models
        if model.tokens > limit
    ]
    total = sum(model.tokens for model in models)
    if not found and total > limit:
        largest = max(models, key=lambda model: model.tokens)
        what = " + ".join(f"{model.field} {model.tokens}" for model in models)
        found.append(
            _over(
                largest.field,
                f"every model together, {what} = {total} tokens per step",
                limit,
                "maxTokensPerStep",
            )
        )
    return found


def _replay_violations(data: dict[str, Any], policy: TenantPolicy, sizes: Sizes) -> list[Violation]:
    memory = replay_memory(data, sizes)
    limit = Decimal(str(policy.max_replay_memory_gib)) * GIB
    if memory is None or memory[1] <= limit:
        return []
    return [
        _over(
            "critic.replay.capacity",
            f"{memory[0]} ({Decimal(memory[1]) / GIB:.4g} GiB of Redis)",
            f"{policy.max_replay_memory_gib:g} GiB",
            "maxReplayMemoryGib",
        )
    ]


def _count(value: Any) -> int:
    """An integer a spec holds; 0 for anything else (a raw body may hold any JSON there)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _work_violations(data: dict[str, Any], policy: TenantPolicy, sizes: Sizes) -> list[Violation]:
    """Tokens per step, replay memory, probe continuations and held-out evaluation tasks per step."""
    found = _generation_violations(data, policy, sizes) + _replay_violations(data, policy, sizes)
    probe = data.get("critic_probe")
    # Numbers only: a raw body's string times a number would be a string of that many copies.
    states = _count(probe.get("states")) if isinstance(probe, dict) else 0
    continuations = _count(probe.get("continuations")) if isinstance(probe, dict) else 0
    if states * continuations > policy.max_probe_episodes:
        what = f"states {states} x continuations {continuations} = {states * continuations} continuations per probe"
        found.append(_over("critic_probe", what, policy.max_probe_episodes, "maxProbeEpisodes"))
    orchestrator = data.get("orchestrator") or {}
    every, eval_tasks = orchestrator.get("eval_every"), int(orchestrator.get("eval_tasks", 0))
    if every is not None and eval_tasks / every > policy.max_eval_tasks_per_step:
        what = f"eval_tasks {eval_tasks} every {every} steps = {eval_tasks / every:g} tasks per policy step"
        found.append(
            _over(
                "orchestrator.eval_tasks", what, f"{policy.max_eval_tasks_per_step:g}", "maxEvalTasksPerStep"
            )
        )
    return found


def _sandbox_disk_violations(data: dict[str, Any], policy: TenantPolicy) -> list[Violation]:
    environment = data.get("environment") or {}
    sandbox, parallel = environment.get("sandbox"), environment.get("parallel_executions")
    if not isinstance(sandbox, dict) or not isinstance(parallel, int):
        return []
    disk = int(sandbox["disk_mb"])
    if disk * parallel <= policy.sandbox.parallel_disk_mb:
        return []
    what = f"disk_mb {disk} x parallel_executions {parallel} = {disk * parallel} MiB of tmpfs at once"
    return [
        _over(
            "environment.parallel_executions",
            what,
            f"{policy.sandbox.parallel_disk_mb} MiB",
            "sandbox.parallelDiskMb",
        )
    ]


def quota_violations(
    spec_data: dict[str, Any], policy: TenantPolicy, sizes: Sizes = ONE_TURN
) -> list[Violation]:
    """Replicas, steps and work sizes over the tenant's quotas in a dumped spec (``sizes``: its
    longest episode, which the dumped spec does not hold; unset, one turn and no prompt).

    What the spec names (paths, modules, URLs, Secrets) and the sandbox's isolation are checked by
    :func:`lecritique.tenancy.spec_rules.spec_violations`, which calls this too.
    """
    found: list[Violation] = []
    for field, replicas in _replica_fields(spec_data):
        if replicas > policy.max_replicas:
            found.append(_over(field, str(replicas), policy.max_replicas, "maxReplicas"))
    steps = spec_data.get("orchestrator", {}).get("steps")
    if isinstance(steps, int) and steps > policy.max_steps:
        found.append(_over("orchestrator.steps", str(steps), policy.max_steps, "maxSteps"))
    found += _critic_violations(spec_data.get("critic") or {}, policy)
    found += _work_violations(spec_data, policy, sizes)
    found += _sandbox_disk_violations(spec_data, policy)
    return found + generator_violations(spec_data, policy)


def written_quota_violations(body: Any, policy: TenantPolicy, sizes: Sizes = ONE_TURN) -> list[Violation]:
    """The quotas over the numbers a tenant wrote, before its spec is validated (defaults are not
    filled in yet: what only a default exceeds is refused after validation, by :func:`quota_violations`;
    ``sizes``: what is known without the spec, e.g. the smallest replay row).
    A body whose shape these checks cannot read yields nothing here; validation names what is wrong."""
    if not isinstance(body, dict):
        return []
    try:
        return quota_violations(body, policy, sizes)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError):
        return []  # e.g. eval_every false (0): a division by zero; validation refuses the value


def resource_violations(
    gpus: int, cpus: tuple[Decimal, Decimal], memory: tuple[Decimal, Decimal], policy: TenantPolicy
) -> list[Violation]:
    """GPUs, CPU cores and memory bytes (requests, limits) a launcher computed from its rendering,
    over all the experiment's pods: one violation of ``placement`` naming each quota exceeded."""
    said = []
    if gpus > policy.max_gpus:
        said.append(f"{gpus} GPUs > {policy.max_gpus} (maxGpus)")
    for kind, total in zip(("requests", "limits"), cpus, strict=True):
        if total > Decimal(str(policy.max_cpus)):
            said.append(f"CPU {kind} {total.normalize():f} > {policy.max_cpus:g} CPUs (maxCpus)")
    for kind, total in zip(("requests", "limits"), memory, strict=True):
        if total > Decimal(str(policy.max_memory_gib)) * GIB:
            said.append(f"memory {kind} {total / GIB:.6g} GiB > {policy.max_memory_gib:g} GiB (maxMemoryGib)")
    if not said:
        return []
    message = (
        f"over all its pods the experiment exceeds this tenant's limits: {'; '.join(said)}; the operator "
        "raises a limit with its key in the tenant's policy (the chart's api.tenantPolicies)"
    )
    return [Violation("placement", message, "limit")]
