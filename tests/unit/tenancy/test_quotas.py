"""The tenant policy's round-3 quotas and allow-lists, as pure functions: what the defaults accept
(every example spec, every reasoning-gym dataset's own defaults) and how entries merge."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from lecritique.config.experiment import ExperimentSpec, load_spec
from lecritique.config.work import spec_work
from lecritique.envs.codeio import CodeIOConfig
from lecritique.envs.reasoning_gym import registered_datasets
from lecritique.envs.sandbox import SandboxConfig
from lecritique.replay.memory import trajectory_row_bytes
from lecritique.tenancy.generator_config import dataset_defaults, generator_violations
from lecritique.tenancy.placement_rules import kubernetes_toleration, placement_violations
from lecritique.tenancy.policy import SandboxPolicy, TenantPolicy, resolve_policy
from lecritique.tenancy.quotas import quota_violations, resource_violations
from lecritique.tenancy.spec_rules import spec_violations
from lecritique.tenancy.work import Sizes, generation_per_step

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(
    path
    for path in (ROOT / "examples").rglob("*.yaml")
    if "studies" not in path.parts
    and isinstance(yaml.safe_load(path.read_text()), dict)
    and "environment" in yaml.safe_load(path.read_text())
)


def test_the_parallel_disk_default_is_the_sandbox_defaults_product() -> None:
    parallel = CodeIOConfig.model_fields["parallel_executions"].default
    assert SandboxPolicy().parallel_disk_mb == SandboxConfig().disk_mb * parallel


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_example_spec_fits_the_default_quotas(path: Path) -> None:
    spec = load_spec(path)
    assert quota_violations(spec.model_dump(mode="json"), TenantPolicy(), _sizes(spec)) == []
    sandboxes = [
        v
        for v in spec_violations(
            spec, "t", TenantPolicy(), models_root="/m", datasets_root="/d", secrets_are="kubernetes"
        )
        if ".sandbox" in v.field
    ]
    assert sandboxes == []


def _sizes(spec: ExperimentSpec) -> Sizes:
    work = spec_work(spec)
    return Sizes(work.prompt, work.response, work.row_bytes, work.critic)


def test_every_reasoning_gym_datasets_own_defaults_pass() -> None:
    datasets = {}
    for name in registered_datasets():
        settings = {
            key: value for key, value in dataset_defaults(name).items() if key not in ("seed", "size")
        }
        datasets[name] = {"config": json_safe(settings)}
    data = {"environment": {"kind": "reasoning_gym", "datasets": datasets}}
    assert generator_violations(data, TenantPolicy()) == []


def json_safe(value: Any) -> Any:
    """A default as JSON would carry it (tuples as lists, enums and dataclasses dropped)."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items() if json_safe(item) is not None}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value):
        return None
    return None


def test_sandbox_entries_merge_key_by_key() -> None:
    policies = {
        "*": {"sandbox": {"memoryMb": 2048, "namespaces": "require"}},
        "a": {"sandbox": {"diskMb": 64}},
    }
    merged = resolve_policy(policies, "a").sandbox
    assert (merged.memory_mb, merged.namespaces, merged.disk_mb) == (2048, "require", 64)
    assert resolve_policy(policies, "b").sandbox.disk_mb is None


def test_tolerations_compare_in_kubernetes_form() -> None:
    spec_form = {
        "key": "pool",
        "operator": "Equal",
        "value": "big",
        "effect": None,
        "toleration_seconds": None,
    }
    assert kubernetes_toleration(spec_form) == kubernetes_toleration({"key": "pool", "value": "big"})
    chart = {
        "rollout": {"tolerations": [{"key": "pool", "value": "big"}], "node_selector": {}, "affinity": {}}
    }
    assert placement_violations({"rollout": {"tolerations": [spec_form]}}, chart, TenantPolicy()) == []
    refused = placement_violations({"value_trainer": {"tolerations": [spec_form]}}, chart, TenantPolicy())
    assert [v.field for v in refused] == ["placement.value_trainer.tolerations.0"]


def test_resources_name_every_quota_exceeded_in_one_message() -> None:
    gib = Decimal(2**30)
    policy = TenantPolicy(max_gpus=1, max_cpus=4, max_memory_gib=8)
    (violation,) = resource_violations(2, (Decimal(4), Decimal(5)), (8 * gib, 9 * gib), policy)
    assert violation.field == "placement" and violation.kind == "limit"
    for said in ("2 GPUs > 1 (maxGpus)", "CPU limits 5 > 4 CPUs (maxCpus)", "memory limits 9 GiB > 8 GiB"):
        assert said in violation.message
    assert "requests" not in violation.message
    assert resource_violations(1, (Decimal(4), Decimal(4)), (8 * gib, 8 * gib), policy) == []


def test_critic_shapes_are_estimated_from_both_fields() -> None:
    data: dict[str, Any] = {"critic": {"tiny": {"layers": 2, "hidden": 128}}}
    assert quota_violations(data, TenantPolicy(max_critic_parameters=2 * 16 * 128**2)) == []
    (over,) = quota_violations(data, TenantPolicy(max_critic_parameters=2 * 16 * 128**2 - 1))
    assert over.field == "critic.tiny" and "524288 parameters" in over.message
    (unset,) = quota_violations({"critic": {"tiny": {"layers": 2, "hidden": None}}}, TenantPolicy())
    assert unset.field == "critic.tiny.hidden"


def test_the_spec_default_sizes_pass() -> None:
    from tests.helm_support import spec_data

    spec = ExperimentSpec.model_validate(spec_data())
    assert quota_violations(spec.model_dump(mode="json"), TenantPolicy()) == []


# ---- issue #46, item 4: every model that generates, and the replay's memory ----------------------
def _generative(sections: dict[str, Any] | None = None, **critic: Any) -> ExperimentSpec:
    from tests.helm_support import spec_data

    return ExperimentSpec.model_validate(
        spec_data(critic={"kind": "generative", **critic}, **(sections or {}))
    )


def test_a_generative_critics_tokens_count_against_the_tokens_per_step() -> None:
    """The issue's spec: eval_samples 1024 x samples_per_state 1024 x max_tokens 32,768 x max_segments
    4,096 was accepted because only the policy's tokens counted."""
    spec = _generative(
        eval_samples=1024, samples_per_state=1024, max_tokens=32_768, segments={"max_segments": 4096}
    )
    (refused,) = quota_violations(spec.model_dump(mode="json"), TenantPolicy(), _sizes(spec))
    assert refused.field == "critic" and "maxTokensPerStep" in refused.message
    assert "eval_samples 1024" in refused.message and "samples_per_state 1024" in refused.message
    batch = spec.batch_size
    scoring = batch * 4096 * 1024 * 32_768
    assert str(scoring) in refused.message


def test_the_models_together_are_bounded_when_none_is_alone() -> None:
    spec = _generative(
        {"orchestrator": {"eval_every": 5, "eval_tasks": 64}},
        max_tokens=1024,
        segments={"max_segments": 64},
        eval_samples=4,
    )
    data = spec.model_dump(mode="json")
    models = {model.field: model.tokens for model in generation_per_step(data, _sizes(spec))}
    assert set(models) == {"rollout", "critic", "orchestrator.eval_tasks"}, models
    total = sum(models.values())
    policy = TenantPolicy(max_tokens_per_step=max(models.values()) + 1)
    assert total > policy.max_tokens_per_step
    (refused,) = quota_violations(data, policy, _sizes(spec))
    assert "every model together" in refused.message and str(total) in refused.message
    assert quota_violations(data, TenantPolicy(max_tokens_per_step=total), _sizes(spec)) == []


def test_a_frozen_llm_critic_and_a_probe_count_too() -> None:
    from tests.helm_support import spec_data

    frozen = ExperimentSpec.model_validate(
        spec_data(
            critic={"kind": "frozen_llm", "max_tokens": 32_768, "hindsight": False},
            estimator={"name": "rloo"},
        )
    )
    fields = {m.field for m in generation_per_step(frozen.model_dump(mode="json"), _sizes(frozen))}
    assert "critic" in fields
    probed = ExperimentSpec.model_validate(spec_data(critic_probe={"states": 64, "continuations": 8}))
    found = {m.field: m.tokens for m in generation_per_step(probed.model_dump(mode="json"), _sizes(probed))}
    assert found["critic_probe"] == 64 * 8 * probed.rollout.sampling.max_tokens


def test_replay_memory_counts_against_the_tenants_quota() -> None:
    """The issue's spec: capacity 10^7 at 65,536 trajectories a step and max_reuse 1000 (201 before)."""
    from tests.helm_support import spec_data

    spec = ExperimentSpec.model_validate(
        spec_data(
            rollout={"tasks_per_step": 16_384, "group_size": 4},
            critic={"kind": "discriminative", "replay": {"capacity": 10**7, "max_reuse": 1000}},
        )
    )
    refused = [
        v
        for v in quota_violations(spec.model_dump(mode="json"), TenantPolicy(), _sizes(spec))
        if v.field == "critic.replay.capacity"
    ]
    assert len(refused) == 1 and "maxReplayMemoryGib" in refused[0].message, refused
    assert "10000000 trajectories" in refused[0].message
    roomy = TenantPolicy(max_replay_memory_gib=1e4)
    assert not [
        v
        for v in quota_violations(spec.model_dump(mode="json"), roomy, _sizes(spec))
        if v.field == "critic.replay.capacity"
    ]


def test_the_numbers_a_tenant_wrote_are_checked_before_validation() -> None:
    """What the body says is refused before the spec is built (validation costs more than reading numbers);
    a body these checks cannot read yields nothing here, and validation names what is wrong with it."""
    from lecritique.tenancy.quotas import written_quota_violations

    body = {"rollout": {"tasks_per_step": 65_536, "group_size": 1024, "sampling": {"max_tokens": 32_768}}}
    (refused,) = written_quota_violations(body, TenantPolicy())
    assert refused.field == "rollout" and "maxTokensPerStep" in refused.message
    capacity = {"critic": {"replay": {"capacity": 10**7}}}
    smallest_row = Sizes(row_bytes=trajectory_row_bytes(0, 0))
    refused = written_quota_violations(capacity, TenantPolicy(), smallest_row)
    assert [v.field for v in refused] == ["critic.replay.capacity"]
    for unreadable in (
        [],
        "spec",
        {"rollout": [1]},
        {"critic_probe": {"states": "many"}},
        {"orchestrator": 5},
        {"orchestrator": {"eval_every": False, "eval_tasks": 64}},  # found by schemathesis: 64 / 0
        {"orchestrator": {"eval_every": 0, "eval_tasks": 64}},
        {"critic_probe": {"states": "x" * 1000, "continuations": 10**9}},  # no terabyte string
    ):
        assert written_quota_violations(unreadable, TenantPolicy()) == []
