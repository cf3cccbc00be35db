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
from lecritique.envs.codeio import CodeIOConfig
from lecritique.envs.reasoning_gym import registered_datasets
from lecritique.envs.sandbox import SandboxConfig
from lecritique.tenancy.generator_config import dataset_defaults, generator_violations
from lecritique.tenancy.placement_rules import kubernetes_toleration, placement_violations
from lecritique.tenancy.policy import SandboxPolicy, TenantPolicy, resolve_policy
from lecritique.tenancy.quotas import quota_violations, resource_violations
from lecritique.tenancy.spec_rules import spec_violations

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
    assert quota_violations(spec.model_dump(mode="json"), TenantPolicy()) == []
    sandboxes = [
        v
        for v in spec_violations(
            spec, "t", TenantPolicy(), models_root="/m", datasets_root="/d", secrets_are="kubernetes"
        )
        if ".sandbox" in v.field
    ]
    assert sandboxes == []


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
