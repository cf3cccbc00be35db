"""The second and third passes of the tenant policy (code, dataset paths, tracker destinations; the
sandbox's settings, placement, CPU/memory and size quotas) travel from the chart's values to what
the API enforces, in the same shape as the first."""

from __future__ import annotations

import json

from pydantic.alias_generators import to_camel

from lecritique.tenancy.policy import SandboxPolicy, TenantPolicy, resolve_policy
from lecritique.tenancy.spec_rules import tenant_dataset_roots
from services.api.settings import ApiSettings
from tests.helm_support import CHART, one, render_objects

EGRESS = {"to": [{"ipBlock": {"cidr": "10.0.0.7/32"}}], "ports": [{"port": 5000, "protocol": "TCP"}]}


def test_verifier_dataset_and_tracker_rules_from_values_are_what_the_api_enforces() -> None:
    policies = {
        "*": {"datasetRoots": ["/weights/datasets/shared"]},
        "research": {
            "verifierEntryPoints": ["team_verifiers.math:score"],
            "trackerEndpoints": ["https://mlflow.internal:5000"],
            "trackerEgress": [EGRESS],
            "sandboxPackages": ["networkx"],
        },
    }
    values = {"api": {"tenantPolicies": policies, "datasetsRoot": "/weights/data"}}
    deployment = one(render_objects(values), "Deployment", "-api")
    env = {
        i["name"]: i.get("value", "") for i in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    settings = ApiSettings.from_env(env)
    research = resolve_policy(settings.tenant_policies, "research")
    assert research.verifier_entry_points == ("team_verifiers.math:score",)
    assert research.tracker_endpoints == ("https://mlflow.internal:5000",) and research.tracker_egress == (
        EGRESS,
    )
    assert research.sandbox_packages == ("networkx",)
    assert tenant_dataset_roots("research", research, settings.datasets_root) == [
        "/weights/data/research",
        "/weights/datasets/shared",
    ]
    default = resolve_policy(settings.tenant_policies, "other")
    assert default.verifier_entry_points == () and default.tracker_endpoints == ()


def test_sandbox_placement_and_size_quotas_from_values_are_what_the_api_enforces() -> None:
    """The third pass (issue 37): the sandbox's settings, placement allow-lists, CPU/memory and size
    quotas travel from the chart's camelCase values to the policy the API resolves."""
    toleration = {"key": "pool", "operator": "Equal", "value": "big", "effect": "NoSchedule"}
    policies = {
        "*": {"sandbox": {"memoryMb": 2048}, "maxCpus": 512},
        "research": {
            "sandbox": {"namespaces": "require", "auditHook": True, "diskMb": 64, "parallelDiskMb": 512},
            "tolerations": [toleration],
            "nodeSelectors": {"pool": ["big", "huge"]},
            "affinities": [{"nodeAffinity": {}}],
            "maxMemoryGib": 4096,
            "maxCriticParameters": 2_000_000_000,
            "maxTokensPerStep": 67_108_864,
            "maxProbeEpisodes": 65_536,
            "maxEvalTasksPerStep": 2048,
            "maxGeneratorScale": 100,
        },
    }
    deployment = one(render_objects({"api": {"tenantPolicies": policies}}), "Deployment", "-api")
    env = {
        i["name"]: i.get("value", "") for i in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    research = resolve_policy(ApiSettings.from_env(env).tenant_policies, "research")
    assert research.sandbox.model_dump(exclude_unset=True) == {
        "namespaces": "require",
        "audit_hook": True,
        "memory_mb": 2048,  # from "*", key by key
        "disk_mb": 64,
        "parallel_disk_mb": 512,
    }
    assert research.tolerations == (toleration,) and research.node_selectors == {"pool": ("big", "huge")}
    assert research.affinities == ({"nodeAffinity": {}},)
    assert (research.max_cpus, research.max_memory_gib, research.max_critic_parameters) == (
        512,
        4096,
        2 * 10**9,
    )
    assert (research.max_tokens_per_step, research.max_probe_episodes) == (67_108_864, 65_536)
    assert (research.max_eval_tasks_per_step, research.max_generator_scale) == (2048, 100)


def test_the_values_schema_lists_every_policy_key() -> None:
    """A key the API reads but the schema refuses (or the other way round) cannot be set from values."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    entry = schema["properties"]["api"]["properties"]["tenantPolicies"]["additionalProperties"]
    assert set(entry["properties"]) == {to_camel(name) for name in TenantPolicy.model_fields}
    assert set(entry["properties"]["sandbox"]["properties"]) == {
        to_camel(name) for name in SandboxPolicy.model_fields
    }
