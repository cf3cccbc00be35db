"""``lecritique chart render --experiment SPEC``: the pods an experiment would get, before it is submitted.

The API's kubernetes launcher builds an experiment's objects from the spec and the chart's
``launcher-defaults.json`` (a ConfigMap the chart renders): per component its image, node
selector, tolerations, affinity and resources, with the spec's ``placement`` over them. Here the
same function (:func:`lecritique.launch.kubernetes.render.render_experiment_objects`) runs on the
ConfigMap Helm's engine rendered from the given values, so the GPU node-pool settings that
otherwise appear only inside that ConfigMap's JSON are shown pod by pod.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml

LAUNCHER_DEFAULTS = "launcher-defaults.json"
API_POLICIES = "LECRITIQUE_API_TENANT_POLICIES"
"""The API Deployment's variable holding the chart's ``api.tenantPolicies`` (JSON)."""


PREVIEW_TOKENS_SECRET = "preview-only"
"""The ``api.auth.existingSecret`` a preview renders with when the values name no API token: the
chart refuses to render without one, and the API's tokens change nothing in an experiment's pods."""


def without_token_requirement(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` able to render without an operator token (only for the experiment's preview)."""
    auth = ((values.get("api") or {}).get("auth")) or {}
    if auth.get("tokens") or auth.get("existingSecret"):
        return values
    api = dict(values.get("api") or {})
    api["auth"] = {**auth, "existingSecret": PREVIEW_TOKENS_SECRET}
    return {**values, "api": api}


def launcher_defaults(templates: dict[str, str]) -> dict[str, Any]:
    """The chart's launcher defaults, from the rendered API ConfigMap that carries them."""
    for path, text in sorted(templates.items()):
        if not path.endswith((".yaml", ".yml")):
            continue  # NOTES.txt
        for document in yaml.safe_load_all(text):
            if isinstance(document, dict) and LAUNCHER_DEFAULTS in (document.get("data") or {}):
                found: dict[str, Any] = json.loads(document["data"][LAUNCHER_DEFAULTS])
                return found
    raise typer.BadParameter(
        f"the rendered chart has no {LAUNCHER_DEFAULTS} (is api.enabled false, or the launcher not kubernetes?)"
    )


def _pods_of(workload: dict[str, Any]) -> int:
    spec = workload["spec"]
    if workload["kind"] == "Job":
        return int(spec.get("parallelism", 1))
    return int(spec.get("replicas", 1))


def pod_summary(workload: dict[str, Any]) -> dict[str, Any]:
    """What a workload's pods get: count, placement, pull secrets and each container's image and resources."""
    pod = workload["spec"]["template"]["spec"]
    summary: dict[str, Any] = {
        "kind": workload["kind"],
        "name": workload["metadata"]["name"],
        "pods": _pods_of(workload),
    }
    for key in (
        "nodeSelector",
        "tolerations",
        "affinity",
        "imagePullSecrets",
        "runtimeClassName",
        "priorityClassName",
    ):
        if pod.get(key):
            summary[key] = pod[key]
    summary["containers"] = [
        {"name": c["name"], "image": c["image"], "resources": c.get("resources") or "none (best effort)"}
        for c in pod["containers"]
    ]
    return summary


def api_environment(templates: dict[str, str]) -> dict[str, str]:
    """The rendered API Deployment's plain variables (``LECRITIQUE_API_*``: what the API reads)."""
    for path, text in sorted(templates.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        for document in yaml.safe_load_all(text):
            if not isinstance(document, dict) or document.get("kind") != "Deployment":
                continue
            for container in document["spec"]["template"]["spec"]["containers"]:
                env = {item["name"]: item["value"] for item in container.get("env") or () if "value" in item}
                if API_POLICIES in env:
                    return env
    raise typer.BadParameter("the rendered chart has no API Deployment (is api.enabled false?)")


def tenant_context(templates: dict[str, str], tenant: str) -> Any:
    """The API's ``tenant`` finding context for ``tenant`` from the rendered chart: its
    ``api.tenantPolicies``, ``modelsRoot`` and ``datasetsRoot`` as the API Deployment receives them."""
    from lecritique.launch.tenant_findings import TenantFindings
    from lecritique.tenancy.policy import resolve_policy, validate_policies

    env = api_environment(templates)
    policies = json.loads(env[API_POLICIES] or "{}")
    validate_policies(policies)
    return TenantFindings(
        tenant,
        resolve_policy(policies, tenant),
        models_root=env.get("LECRITIQUE_API_MODELS_ROOT", "/weights/models"),
        datasets_root=env.get("LECRITIQUE_API_DATASETS_ROOT", "/weights/datasets"),
        secrets_are="kubernetes",
    )


def _tenant_rendering(tenant_rules: Any) -> dict[str, Any]:
    """What the API's launcher renders from the tenant's policy: egress rules and dataset folders."""
    from lecritique.tenancy.spec_rules import tenant_dataset_roots

    if tenant_rules is None:
        return {}
    policy = tenant_rules.policy
    return {
        "llm_egress": list(policy.llm_egress),
        "tracker_egress": list(policy.tracker_egress),
        "dataset_roots": tuple(tenant_dataset_roots(tenant_rules.tenant, policy, tenant_rules.datasets_root)),
    }


def _say(findings: list[Any]) -> None:
    for finding in findings:
        typer.secho(
            f"{finding.level} ({finding.context}): {finding.text}",
            fg="red" if finding.level == "error" else "yellow",
            err=True,
        )
    if any(finding.level == "error" for finding in findings):
        raise typer.Exit(2)


def experiment_pods(
    templates: dict[str, str], spec_path: Path, experiment_id: str, tenant: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """(a YAML summary of every pod of the experiment, every object it would create). The spec's
    findings and the cluster's (the list the API's kubernetes launcher answers a submission with),
    with ``tenant`` that tenant's too (its policy in the chart's values, as the API checks it), go
    to stderr first; exit 2 when any is an error."""
    from lecritique.config import SpecError, load_spec
    from lecritique.config.findings import spec_findings
    from lecritique.launch.components import ChartDefaults
    from lecritique.launch.kubernetes.cluster_findings import ClusterFindings
    from lecritique.launch.kubernetes.launcher import usage_of
    from lecritique.launch.kubernetes.render import render_experiment_objects
    from lecritique.launch.tenant_findings import TenantUsageFindings

    defaults = launcher_defaults(templates)
    chart = ChartDefaults.model_validate(defaults)
    try:
        spec = load_spec(spec_path)
        tenant_rules = tenant_context(templates, tenant) if tenant is not None else None
        contexts = [context for context in (tenant_rules, ClusterFindings(chart)) if context is not None]
        _say(spec_findings(spec, contexts))
        objects = render_experiment_objects(spec, experiment_id, defaults, **_tenant_rendering(tenant_rules))
        if tenant_rules is not None:
            # What the API checks once its launcher has rendered: placement and GPU/CPU/memory quotas.
            _say(TenantUsageFindings(tenant_rules.policy, usage_of(objects, chart)).findings(spec))
    except (SpecError, ValueError) as error:
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(2) from None
    workloads = [obj for obj in objects if obj["kind"] in ("Deployment", "StatefulSet", "Job")]
    component = "app.kubernetes.io/component"
    pods = {
        obj["metadata"]["labels"].get(component, obj["metadata"]["name"]): pod_summary(obj)
        for obj in workloads
    }
    head = (
        f"# experiment {experiment_id} of {spec_path} in namespace {defaults['namespace']} (release "
        f"{defaults['release']}): {len(objects)} objects, {sum(p['pods'] for p in pods.values())} pods in "
        f"{len(workloads)} workloads, as the API's kubernetes launcher would create them from these chart "
        "values"
        + (
            f" for tenant {tenant}, its policy and quotas checked"
            if tenant
            else " (no --tenant: the tenant policies and quotas are not checked)"
        )
        + "\n"
    )
    return head + yaml.safe_dump({"pods": pods}, sort_keys=False, width=100), objects
