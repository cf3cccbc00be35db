"""Render one experiment into Kubernetes objects (a pure function: no cluster, no clock, no env).

Per experiment ``ID`` (a DNS label), in the release's namespace:

* ConfigMap ``ID-spec``: the resolved spec (``spec.json``) every pod reads.
* Secret ``ID-redis`` (when launched with Redis auth): the password of the experiment's own Redis
  user, named ``ID`` (:class:`lecritique.launch.redis_acl.ExperimentUsers`); its pods connect as it.
* A headless Service per component (``ID-rollout``, ...): the single address of a service whose
  name resolves to every ready pod's IP (the orchestrator's ``ReplicaPool`` round-robins over them);
  it also carries the ``metrics`` port the chart's ServiceMonitors scrape.
* Deployments: environment-verifier, rollout, value-evaluator (stateless, scale with replicas).
* StatefulSets: value-trainer, policy-trainer (one pod each; ``torchrun`` when several processes,
  over several pods when they exceed one node's GPUs: :mod:`lecritique.launch.kubernetes.multinode`).
* Job ``ID-orchestrator``: the experiment loop; it resumes from its checkpoint on the weight volume.

Every object carries the release's labels plus ``app.kubernetes.io/component`` and
``lecritique.dev/experiment: ID``, which is how :mod:`lecritique.launch.kubernetes.launcher`
deletes them. Node pools, tolerations, affinity and resources come from the spec's
``placement`` section where set, else from the chart's per-component defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.config.findings import SpecRefused
from lecritique.config.placement import ScalablePlacement
from lecritique.launch.components import (
    COMPONENTS,
    EXPERIMENT_LABEL,
    GRPC_PORT,
    METRICS_PORT,
    ChartDefaults,
    Component,
    ComponentDefaults,
)
from lecritique.launch.kubernetes.cluster_findings import ClusterFindings
from lecritique.launch.kubernetes.multinode import POD_NAME_LABEL, TRAINERS, ranks_service, trainer_layout
from lecritique.launch.kubernetes.names import (
    EXPERIMENT_ID,
    component_names,
    object_metadata,
    object_name,
    selector_labels,
)
from lecritique.launch.kubernetes.pods import (
    REDIS_USER_SECRET_KEY,
    RUN_AS_USER,
    multi_node_trainer,
    pod_template,
    redis_env,
    redis_user_secret_name,
)
from lecritique.launch.kubernetes.policies import collective_peers, disruption_budget, network_policy
from lecritique.tenancy.spec_rules import DATASET_ROOTS_ENV

__all__ = ["EXPERIMENT_LABEL", "RUN_AS_USER", "object_name", "render_experiment_objects", "resolved_spec"]


def _replicas(spec: ExperimentSpec, component: Component, chart: ComponentDefaults) -> int:
    """The spec's replica count where the user set one, else the chart's default."""
    if component == Component.rollout and "replicas" in spec.rollout.model_fields_set:
        return spec.rollout.replicas
    if (
        component == Component.value_evaluator
        and spec.critic is not None
        and "evaluator_replicas" in spec.critic.model_fields_set
    ):
        return spec.critic.evaluator_replicas
    if component == Component.environment_verifier:
        placed = spec.placement.environment_verifier
        if isinstance(placed, ScalablePlacement) and placed.replicas is not None:
            return placed.replicas
    if component in TRAINERS:
        return trainer_layout(spec, component, chart.gpus_per_node).pods
    if component == Component.orchestrator:
        return 1
    return chart.replicas


def resolved_spec(spec: ExperimentSpec, defaults: ChartDefaults) -> ExperimentSpec:
    """The spec the pods read: replica counts made explicit (so every process agrees on them)."""
    rollout = spec.rollout.model_copy(
        update={"replicas": _replicas(spec, Component.rollout, defaults.components.rollout)}
    )
    update: dict[str, Any] = {"rollout": rollout}
    if spec.critic is not None:
        replicas = _replicas(spec, Component.value_evaluator, defaults.components.value_evaluator)
        update["critic"] = spec.critic.model_copy(update={"evaluator_replicas": replicas})
    return spec.model_copy(update=update)


def _service(
    spec: ExperimentSpec, experiment_id: str, component: Component, defaults: ChartDefaults
) -> dict[str, Any]:
    ports = [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}]
    if component != Component.orchestrator:
        ports.insert(
            0,
            {
                "name": "grpc",
                "port": GRPC_PORT,
                "targetPort": "grpc",
                "protocol": "TCP",
                "appProtocol": "grpc",
            },
        )
    selector = selector_labels(defaults, experiment_id, component)
    if multi_node_trainer(spec, component, defaults.components.of(component)):
        # Only global rank 0 (on pod 0) serves gRPC; the other pods are reached by torch.distributed.
        selector[POD_NAME_LABEL] = f"{object_name(experiment_id, component)}-0"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(
            defaults, experiment_id, object_name(experiment_id, component), component, spec
        ),
        "spec": {
            # Headless: the name resolves to every ready pod, which the client round-robins.
            "clusterIP": "None",
            "selector": selector,
            "ports": ports,
        },
    }


def _workload(
    spec: ExperimentSpec,
    experiment_id: str,
    component: Component,
    defaults: ChartDefaults,
    dataset_roots: tuple[str, ...],
) -> dict[str, Any]:
    info = COMPONENTS[component]
    chart = defaults.components.of(component)
    name = object_name(experiment_id, component)
    metadata = object_metadata(defaults, experiment_id, name, component, spec)
    template = pod_template(spec, experiment_id, component, defaults, dataset_roots)
    selector = {"matchLabels": selector_labels(defaults, experiment_id, component)}
    if info.workload == "Job":
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata,
            "spec": {
                "backoffLimit": defaults.orchestrator_backoff_limit,
                "ttlSecondsAfterFinished": defaults.finished_job_ttl_seconds,
                "template": template,
            },
        }
    body: dict[str, Any] = {
        "replicas": _replicas(spec, component, chart),
        "selector": selector,
        "template": template,
    }
    if info.workload == "StatefulSet":
        multi_node = multi_node_trainer(spec, component, chart)
        governing = (
            ranks_service(metadata, selector["matchLabels"])["metadata"]["name"] if multi_node else name
        )
        body = {**body, "serviceName": governing, "podManagementPolicy": "Parallel"}
    return {"apiVersion": "apps/v1", "kind": info.workload, "metadata": metadata, "spec": body}


def _confine_datasets(workload: dict[str, Any], roots: tuple[str, ...]) -> None:
    """Set the tenant's dataset roots on the environment verifier, over any the chart's env sets:
    :mod:`lecritique.envs.dataset_files` checks them again where it opens the file."""
    container = workload["spec"]["template"]["spec"]["containers"][0]
    env = [item for item in container["env"] if item["name"] != DATASET_ROOTS_ENV]
    container["env"] = [*env, {"name": DATASET_ROOTS_ENV, "value": ":".join(roots)}]


def render_experiment_objects(
    spec: ExperimentSpec,
    experiment_id: str,
    chart_defaults: ChartDefaults | Mapping[str, Any],
    *,
    llm_egress: list[dict[str, Any]] | None = None,
    tracker_egress: list[dict[str, Any]] | None = None,
    dataset_roots: tuple[str, ...] = (),
    redis_password: str | None = None,
) -> list[dict[str, Any]]:
    """Every Kubernetes object of one experiment, in creation order (network policies first, so no
    pod ever runs unconfined; then config, services, disruption budgets, workloads).

    ``llm_egress`` / ``tracker_egress``: egress rules of the value evaluator / the orchestrator (the
    tenant's LLM endpoints / tracker servers); ``dataset_roots``: the tenant's dataset folders, the
    only part of the weight volume its environment verifier mounts (read-only; see
    :func:`~lecritique.launch.kubernetes.pods.weights_mounts`) and checked again where a file is
    opened (:func:`_confine_datasets`); ``redis_password``: see :func:`_own_redis_user`.

    Raises :class:`~lecritique.config.findings.SpecRefused` with every field whose placement cannot
    be scheduled as written (:class:`~lecritique.launch.kubernetes.cluster_findings.ClusterFindings`:
    a request above its limit, trainer processes that do not fill whole pods or their GPUs), and
    ``ValueError`` for an experiment id that is not a short DNS label.
    """
    if not EXPERIMENT_ID.fullmatch(experiment_id):
        raise ValueError(
            f"experiment id {experiment_id!r} must be a DNS label of at most 20 characters (a-z, 0-9, '-')"
        )
    defaults = (
        chart_defaults
        if isinstance(chart_defaults, ChartDefaults)
        else ChartDefaults.model_validate(chart_defaults)
    )
    refused = [finding for finding in ClusterFindings(defaults).findings(spec) if finding.level == "error"]
    if refused:
        raise SpecRefused(refused)
    resolved = resolved_spec(spec, defaults)
    components = component_names(resolved)
    services = [_service(resolved, experiment_id, component, defaults) for component in components]
    multi_node = {
        trainer
        for trainer in TRAINERS
        if trainer in components and multi_node_trainer(resolved, trainer, defaults.components.of(trainer))
    }
    for trainer in sorted(multi_node, key=TRAINERS.index):
        name = object_name(experiment_id, trainer)
        services.append(
            ranks_service(
                object_metadata(defaults, experiment_id, name, trainer, resolved),
                selector_labels(defaults, experiment_id, trainer),
            )
        )
    workloads = [
        _workload(resolved, experiment_id, component, defaults, dataset_roots) for component in components
    ]
    if dataset_roots:
        _confine_datasets(workloads[components.index(Component.environment_verifier)], dataset_roots)
    egress = {Component.value_evaluator: llm_egress or [], Component.orchestrator: tracker_egress or []}
    policies, budgets = _policies_and_budgets(
        resolved, experiment_id, defaults, workloads, egress, multi_node
    )
    config_map = _spec_config_map(resolved, experiment_id, defaults)
    secrets = _own_redis_user(resolved, experiment_id, defaults, workloads, redis_password)
    return [*policies, config_map, *secrets, *services, *budgets, *workloads]


def _own_redis_user(
    resolved: ExperimentSpec,
    experiment_id: str,
    defaults: ChartDefaults,
    workloads: list[dict[str, Any]],
    password: str | None,
) -> list[dict[str, Any]]:
    """With ``password`` (of the experiment's own Redis user, named after it, which the API creates)
    and Redis auth in the chart: the Secret holding it, and every container that connects to Redis
    does so as that user; else nothing, and the pods connect as the chart's experiments user."""
    if password is None or defaults.redis_auth is None:
        return []
    own = {item["name"]: item for item in redis_env(defaults, own_user=experiment_id)}
    for workload in workloads:
        for container in workload["spec"]["template"]["spec"]["containers"]:
            container["env"] = [own.get(item["name"], item) for item in container.get("env", [])]
    name = redis_user_secret_name(experiment_id)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": object_metadata(defaults, experiment_id, name, None, resolved),
        "stringData": {REDIS_USER_SECRET_KEY: password},
    }
    return [secret]


def _spec_config_map(resolved: ExperimentSpec, experiment_id: str, defaults: ChartDefaults) -> dict[str, Any]:
    """The ConfigMap holding the resolved spec (``spec.json``) every component reads."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(
            defaults, experiment_id, object_name(experiment_id, "spec"), None, resolved
        ),
        "data": {"spec.json": resolved.model_dump_json(indent=1)},
    }


def _policies_and_budgets(
    resolved: ExperimentSpec,
    experiment_id: str,
    defaults: ChartDefaults,
    workloads: list[dict[str, Any]],
    egress: Mapping[Component, list[dict[str, Any]]],
    multi_node: set[Component],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The network policies and disruption budgets of the components (one workload each, in the
    order of :func:`component_names`; a component that needs neither has none), with each
    component's extra ``egress`` rules and its collective peers among the ``multi_node`` trainers."""
    policies, budgets = [], []
    for component, workload in zip(component_names(resolved), workloads, strict=True):
        metadata = object_metadata(
            defaults, experiment_id, object_name(experiment_id, component), component, resolved
        )
        peers = collective_peers(resolved, component, multi_node)
        policies.append(
            network_policy(experiment_id, component, defaults, metadata, egress.get(component, []), peers)
        )
        budgets.append(
            disruption_budget(
                experiment_id, component, int(workload["spec"].get("replicas", 1)), defaults, metadata
            )
        )
    return [p for p in policies if p], [b for b in budgets if b]
