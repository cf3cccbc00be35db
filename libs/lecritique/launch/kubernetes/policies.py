"""Per-experiment NetworkPolicies and PodDisruptionBudgets (pure functions, like the rest of the rendering).

NetworkPolicies add up: the chart's baseline policy for each component (DNS and Redis egress,
metrics ingress, nothing else) is widened here only within one experiment:

* every service pod accepts gRPC from its own experiment's orchestrator, and from nothing else;
* the orchestrator may open gRPC connections to its own experiment's pods;
* the value evaluator may reach the LLM endpoints its tenant's policy allows (``llm_egress``), and the
  orchestrator, which feeds the experiment trackers, the tracker servers it allows (``tracker_egress``);
* the pods of one torch.distributed group reach each other on any port, both ways (TCPStore
  rendezvous, gloo/NCCL sockets on ephemeral ports): a trainer spread over several pods,
  and a trainer with the replicas it broadcasts weights to (``weight_transport: broadcast``;
  the replicas also connect to each other, since gloo and NCCL connect every pair of ranks).
  Only groups the spec forms get rules.

So one tenant's pods can neither call nor be called by another experiment's pods.

PodDisruptionBudgets protect only what a voluntary eviction would really hurt: a component with
two or more replicas keeps all but one of them through a node drain. Single pods get none (a
budget of ``maxUnavailable: 1`` on one pod protects nothing, and ``0`` would block every drain);
the orchestrator is drained and resumes from its checkpoint, the trainers from their latest published
weights (StatefulSet pods come back under the same name).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.launch.components import COMPONENTS, EXPERIMENT_LABEL, GRPC_PORT, ChartDefaults, Component


def _pods(defaults: ChartDefaults, experiment_id: str, component: Component | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/instance": defaults.release, EXPERIMENT_LABEL: experiment_id}
    if component is not None:
        labels["app.kubernetes.io/component"] = component.value
    return {"podSelector": {"matchLabels": labels}}


def collective_peers(
    spec: ExperimentSpec, component: Component, multi_node_trainers: Set[Component]
) -> list[Component]:
    """The components whose pods share a torch.distributed group with ``component``'s (itself included).

    ``multi_node_trainers``: the trainers whose ranks span several pods.
    """
    groups: list[set[Component]] = [{trainer} for trainer in multi_node_trainers]
    if spec.policy_trainer.weight_transport.kind == "broadcast":
        groups.append({Component.policy_trainer, Component.rollout})
    critic_transport = getattr(spec.critic, "weight_transport", None)
    if critic_transport is not None and critic_transport.kind == "broadcast":
        groups.append({Component.value_trainer, Component.value_evaluator})
    peers = set().union(*[group for group in groups if component in group])
    return sorted(peers, key=lambda peer: peer.value)


def network_policy(
    experiment_id: str,
    component: Component,
    defaults: ChartDefaults,
    metadata: dict[str, Any],
    allowed_egress: list[dict[str, Any]],
    collective: Sequence[Component] = (),
) -> dict[str, Any] | None:
    """The experiment-scoped rules of one component (None: it needs nothing beyond the chart's baseline).

    ``allowed_egress``: the tenant's egress rules for this component (``llm_egress`` for the value
    evaluator, ``tracker_egress`` for the orchestrator; none for the others).

    ``collective``: components (from :func:`collective_peers`) reached on any port, both ways.
    """
    grpc = [{"port": GRPC_PORT, "protocol": "TCP"}]
    ingress: list[dict[str, Any]] = []
    egress: list[dict[str, Any]] = []
    if collective:
        group = [_pods(defaults, experiment_id, peer) for peer in collective]
        ingress.append({"from": group})
        egress.append({"to": group})
    if COMPONENTS[component].serve_name is not None:
        ingress.append({"from": [_pods(defaults, experiment_id, Component.orchestrator)], "ports": grpc})
    if component == Component.orchestrator:
        egress.append({"to": [_pods(defaults, experiment_id)], "ports": grpc})
    egress.extend(allowed_egress)
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
