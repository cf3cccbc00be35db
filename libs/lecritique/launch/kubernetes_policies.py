"""Per-experiment NetworkPolicies and PodDisruptionBudgets (pure functions, like the rest of the rendering).

NetworkPolicies add up: the chart's baseline policy for each component (DNS and Redis egress,
metrics ingress, nothing else) is widened here only within one experiment:

* every service pod accepts gRPC from its own experiment's orchestrator, and from nothing else;
* the orchestrator may open gRPC connections to its own experiment's pods;
* the value evaluator may reach the LLM endpoints its tenant's policy allows (``llm_egress``).

So one tenant's pods can neither call nor be called by another experiment's pods.

PodDisruptionBudgets protect only what a voluntary eviction would really hurt: a component with
two or more replicas keeps all but one of them through a node drain. Single pods get none (a
budget of ``maxUnavailable: 1`` on one pod protects nothing, and ``0`` would block every drain);
the orchestrator is drained and resumes from its checkpoint, the trainers from their latest published
weights (StatefulSet pods come back under the same name).
"""

from __future__ import annotations

from typing import Any

from lecritique.launch.components import COMPONENTS, EXPERIMENT_LABEL, GRPC_PORT, ChartDefaults, Component


def _pods(defaults: ChartDefaults, experiment_id: str, component: Component | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/instance": defaults.release, EXPERIMENT_LABEL: experiment_id}
    if component is not None:
        labels["app.kubernetes.io/component"] = component.value
    return {"podSelector": {"matchLabels": labels}}


def network_policy(
    experiment_id: str,
    component: Component,
    defaults: ChartDefaults,
    metadata: dict[str, Any],
    llm_egress: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """The experiment-scoped rules of one component (None: it needs nothing beyond the chart's baseline)."""
    grpc = [{"port": GRPC_PORT, "protocol": "TCP"}]
    ingress: list[dict[str, Any]] = []
    egress: list[dict[str, Any]] = []
    if COMPONENTS[component].serve_name is not None:
        ingress.append({"from": [_pods(defaults, experiment_id, Component.orchestrator)], "ports": grpc})
    if component == Component.orchestrator:
        egress.append({"to": [_pods(defaults, experiment_id)], "ports": grpc})
    if component == Component.value_evaluator:
        egress.extend(llm_egress)
    if not ingress and not egress:
        return None
    spec: dict[str, Any] = {
        "podSelector": _pods(defaults, experiment_id, component)["podSelector"],
        "policyTypes": [kind for kind, rules in (("Ingress", ingress), ("Egress", egress)) if rules],
    }
    if ingress:
        spec["ingress"] = ingress
    if egress:
        spec["egress"] = egress
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}


def disruption_budget(
    experiment_id: str, component: Component, replicas: int, defaults: ChartDefaults, metadata: dict[str, Any]
) -> dict[str, Any] | None:
    """``maxUnavailable: 1`` for a Deployment of two or more replicas; None otherwise."""
    if COMPONENTS[component].workload != "Deployment" or replicas < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": {"maxUnavailable": 1, "selector": _pods(defaults, experiment_id, component)["podSelector"]},
    }
