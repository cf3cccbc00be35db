"""The second pass of the tenant policy (code, dataset paths, tracker destinations) travels from the
chart's values to what the API enforces, in the same shape as the first."""

from __future__ import annotations

from lecritique.tenancy.policy import resolve_policy
from lecritique.tenancy.spec_rules import tenant_dataset_roots
from services.api.settings import ApiSettings
from tests.helm_support import one, render_objects

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
