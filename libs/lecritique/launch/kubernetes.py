"""Render one experiment into Kubernetes objects (a pure function: no cluster, no clock, no env).

Per experiment ``ID`` (a DNS label), in the release's namespace:

* ConfigMap ``ID-spec``: the resolved spec (``spec.json``) every pod reads.
* A headless Service per component (``ID-rollout``, ...): the single address of a service whose
  name resolves to every ready pod's IP (the orchestrator's ``ReplicaPool`` round-robins over them);
  it also carries the ``metrics`` port the chart's ServiceMonitors scrape.
* Deployments: environment-verifier, rollout, value-evaluator (stateless, scale with replicas).
* StatefulSets (one pod each): value-trainer, policy-trainer (``torchrun`` when several processes).
* Job ``ID-orchestrator``: the experiment loop; it resumes from its checkpoint on the weight volume.

Every object carries the release's labels plus ``app.kubernetes.io/component`` and
``lecritique.dev/experiment: ID``, which is how :mod:`lecritique.launch.kubernetes_launcher`
deletes them. Node pools, tolerations, affinity and resources come from the spec's
``placement`` section where set, else from the chart's per-component defaults.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.config.placement import ComponentPlacement, PlacementSpec, ScalablePlacement
from lecritique.critics.kinds import critic_kind
from lecritique.launch.components import (
    COMPONENTS,
    EXPERIMENT_LABEL,
    GRPC_PORT,
    METRICS_PORT,
    ChartDefaults,
    Component,
    ComponentDefaults,
)
from lecritique.launch.kubernetes_policies import collective_peers, disruption_budget, network_policy
from lecritique.launch.kubernetes_resources import merge_resources
from lecritique.launch.multinode import (
    POD_NAME_LABEL,
    node_rank_env,
    ranks_service,
    torchrun_command,
    trainer_layout,
)

EXPERIMENT_NAME_ANNOTATION = "lecritique.dev/experiment-name"
"""Annotation holding the spec's human-readable name."""
MANAGED_BY = "lecritique-api"
"""``app.kubernetes.io/managed-by`` of experiment objects (the chart's own objects say Helm)."""

# Short enough that "<id>-environment-verifier" and a StatefulSet's revision-hash label stay
# within Kubernetes' 63-character limits.
EXPERIMENT_ID = re.compile(r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?")
"""An experiment id (matched whole with ``fullmatch``)."""

WEIGHTS_MOUNT = "/weights"
SPEC_MOUNT = "/etc/lecritique/spec"
RUN_AS_USER = 10001
"""The non-root uid of every lecritique image (see services/*/Dockerfile)."""


def _placement(spec: ExperimentSpec) -> PlacementSpec:
    placement: PlacementSpec = spec.placement
    return placement


def component_names(spec: ExperimentSpec) -> list[Component]:
    """The components this experiment runs (no critic: no value-evaluator or value-trainer)."""
    names = [Component.environment_verifier, Component.policy_trainer, Component.rollout]
    if spec.critic is not None:
        names += [Component.value_trainer, Component.value_evaluator]
    return [*names, Component.orchestrator]


def object_name(experiment_id: str, component: Component | str) -> str:
    """Name of a component's objects (Service, workload) of one experiment."""
    return f"{experiment_id}-{component}"


def selector_labels(defaults: ChartDefaults, experiment_id: str, component: Component) -> dict[str, str]:
    """Labels that select exactly one experiment's pods of one component."""
    return {
        "app.kubernetes.io/instance": defaults.release,
        "app.kubernetes.io/component": component.value,
        EXPERIMENT_LABEL: experiment_id,
    }


def _labels(defaults: ChartDefaults, experiment_id: str, component: Component | None) -> dict[str, str]:
    labels = {
        **defaults.labels,
        "app.kubernetes.io/instance": defaults.release,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        EXPERIMENT_LABEL: experiment_id,
    }
    if component is not None:
        labels["app.kubernetes.io/component"] = component.value
    return labels


def _metadata(
    defaults: ChartDefaults, experiment_id: str, name: str, component: Component | None, spec: ExperimentSpec
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": defaults.namespace,
        "labels": _labels(defaults, experiment_id, component),
        "annotations": {EXPERIMENT_NAME_ANNOTATION: spec.name},
    }


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
        placed = _placement(spec).environment_verifier
        if isinstance(placed, ScalablePlacement) and placed.replicas is not None:
            return placed.replicas
    if component == Component.policy_trainer:
        return trainer_layout(spec, chart.gpus_per_node).pods
    if component in (Component.value_trainer, Component.orchestrator):
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


def _secret_env(spec: ExperimentSpec, component: Component) -> list[dict[str, Any]]:
    """Secrets the critic kind needs in the value evaluator (e.g. the frozen LLM's API key)."""
    if component != Component.value_evaluator or spec.critic is None:
        return []
    needs = critic_kind(spec.critic).pod_needs(spec.critic)
    return [
        {"name": s.variable, "valueFrom": {"secretKeyRef": {"name": s.secret, "key": s.key}}}
        for s in needs.evaluator_secrets
    ]


def redis_env(defaults: ChartDefaults) -> list[dict[str, Any]]:
    """``REDIS_URL`` of experiment pods: as the experiments' ACL user when the chart set Redis auth.

    The password comes from the chart's Secret and is spliced in by Kubernetes' ``$(VAR)``
    expansion, so it appears in no object the launcher creates.
    """
    auth = defaults.redis_auth
    if auth is None:
        return [{"name": "REDIS_URL", "value": defaults.redis_url}]
    scheme, _, rest = defaults.redis_url.partition("://")
    password = {
        "name": "LECRITIQUE_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": auth.secret_name, "key": auth.password_key}},
    }
    return [
        password,
        {"name": "REDIS_URL", "value": f"{scheme}://{auth.username}:$(LECRITIQUE_REDIS_PASSWORD)@{rest}"},
    ]


def _multi_node_trainer(spec: ExperimentSpec, component: Component, chart: ComponentDefaults) -> bool:
    return component == Component.policy_trainer and trainer_layout(spec, chart.gpus_per_node).multi_node


def _trainer_env(spec: ExperimentSpec, component: Component, chart: ComponentDefaults) -> list[dict[str, Any]]:
    """A multi-pod trainer's node rank, from its pod index."""
    return [node_rank_env()] if _multi_node_trainer(spec, component, chart) else []


def _env(
    defaults: ChartDefaults, chart: ComponentDefaults, experiment_id: str, from_spec: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Built-in variables, then the chart's extra env (it may override them), then what the spec
    asks for, which never replaces a variable already set (the API also refuses reserved names)."""
    builtin: list[dict[str, Any]] = [
        *redis_env(defaults),
        {"name": "LECRITIQUE_EXPERIMENT", "value": experiment_id},
        # The root filesystem is read-only: every cache goes to the /tmp emptyDir.
        {"name": "HOME", "value": "/tmp"},
        {"name": "XDG_CACHE_HOME", "value": "/tmp/.cache"},
        {"name": "HF_HOME", "value": "/tmp/.cache/huggingface"},
        {"name": "TRITON_CACHE_DIR", "value": "/tmp/.cache/triton"},
        {"name": "VLLM_CACHE_ROOT", "value": "/tmp/.cache/vllm"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # Where a trainer's weight broadcast is reached (lecritique.training.weight_sync).
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    by_name = {item["name"]: item for item in builtin}
    for item in chart.env:
        by_name[item["name"]] = dict(item)
    for item in from_spec:
        by_name.setdefault(item["name"], dict(item))
    return list(by_name.values())


def _container_command(
    spec: ExperimentSpec, experiment_id: str, component: Component, defaults: ChartDefaults
) -> list[str]:
    spec_file = f"{SPEC_MOUNT}/spec.json"
    run_dir = f"{WEIGHTS_MOUNT}/experiments/{experiment_id}"
    if component == Component.orchestrator:
        names = component_names(spec)
        command = [
            "lecritique",
            "orchestrate",
            "--spec",
            spec_file,
            "--out",
            f"{run_dir}/run",
            "--experiment",
            experiment_id,
            "--weights-dir",
            WEIGHTS_MOUNT,
            "--metrics-port",
            str(METRICS_PORT),
        ]
        for flag, target in (
            ("--rollout", Component.rollout),
            ("--environment", Component.environment_verifier),
            ("--policy-trainer", Component.policy_trainer),
            ("--value-evaluator", Component.value_evaluator),
            ("--value-trainer", Component.value_trainer),
        ):
            if target in names:
                command += [flag, f"{object_name(experiment_id, target)}:{GRPC_PORT}"]
        return command
    serve_name = COMPONENTS[component].serve_name
    assert serve_name is not None
    serve = [
        "lecritique",
        "serve",
        serve_name,
        "--spec",
        spec_file,
        "--port",
        str(GRPC_PORT),
        "--metrics-port",
        str(METRICS_PORT),
        "--experiment",
        experiment_id,
        "--weights-dir",
        WEIGHTS_MOUNT,
        "--state-dir",
        f"{run_dir}/state",
        "--host",
        "0.0.0.0",
    ]
    if component == Component.policy_trainer and spec.policy_trainer.processes > 1:
        # Rank 0 serves gRPC; the other ranks (on this pod or on the StatefulSet's other pods) join its group.
        layout = trainer_layout(spec, defaults.components.policy_trainer.gpus_per_node)
        return torchrun_command(layout, object_name(experiment_id, component), defaults.namespace, serve)
    return serve


def _probes(component: Component, chart: ComponentDefaults) -> dict[str, Any]:
    def check() -> dict[str, Any]:
        # The orchestrator serves no gRPC; its metrics endpoint shows the process is up.
        if component == Component.orchestrator:
            return {"httpGet": {"path": "/metrics", "port": "metrics"}}
        return {"grpc": {"port": GRPC_PORT}}

    period = 10
    return {
        "startupProbe": {
            **check(),
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": max(1, math.ceil(chart.startup_seconds / period)),
        },
        "readinessProbe": {**check(), "periodSeconds": period, "timeoutSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**check(), "periodSeconds": 20, "timeoutSeconds": 10, "failureThreshold": 6},
    }


def _pod_template(
    spec: ExperimentSpec, experiment_id: str, component: Component, defaults: ChartDefaults
) -> dict[str, Any]:
    chart = defaults.components.of(component)
    placed: ComponentPlacement = getattr(_placement(spec), COMPONENTS[component].placement_key)
    ports = [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}]
    if component != Component.orchestrator:
        ports.insert(0, {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"})
    mounts = [
        {"name": "weights", "mountPath": WEIGHTS_MOUNT},
        {"name": "spec", "mountPath": SPEC_MOUNT, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "weights", "persistentVolumeClaim": {"claimName": defaults.weights_claim}},
        {"name": "spec", "configMap": {"name": object_name(experiment_id, "spec")}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if chart.shm_size is not None:
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": chart.shm_size}})
    container: dict[str, Any] = {
        "name": component.value,
        "image": chart.image,
        "imagePullPolicy": chart.image_pull_policy,
        "command": _container_command(spec, experiment_id, component, defaults),
        "env": _env(defaults, chart, experiment_id, [*_secret_env(spec, component), *_trainer_env(spec, component, chart)]),
        "ports": ports,
        "resources": merge_resources(component, chart, placed, spec),
        **_probes(component, chart),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": defaults.service_account_name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 60,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    node_selector = placed.node_selector if placed.node_selector is not None else chart.node_selector
    tolerations = (
        [t.to_kubernetes() for t in placed.tolerations]
        if placed.tolerations is not None
        else [dict(t) for t in chart.tolerations]
    )
    affinity = placed.affinity if placed.affinity is not None else chart.affinity
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if affinity:
        pod_spec["affinity"] = json.loads(json.dumps(affinity))
    if defaults.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in defaults.image_pull_secrets]
    if component == Component.orchestrator:
        pod_spec["restartPolicy"] = "OnFailure"
    return {
        "metadata": {
            "labels": _labels(defaults, experiment_id, component),
            "annotations": {EXPERIMENT_NAME_ANNOTATION: spec.name},
        },
        "spec": pod_spec,
    }


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
    if _multi_node_trainer(spec, component, defaults.components.of(component)):
        # Only global rank 0 (on pod 0) serves gRPC; the other pods are reached by torch.distributed.
        selector[POD_NAME_LABEL] = f"{object_name(experiment_id, component)}-0"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(
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
    spec: ExperimentSpec, experiment_id: str, component: Component, defaults: ChartDefaults
) -> dict[str, Any]:
    info = COMPONENTS[component]
    chart = defaults.components.of(component)
    name = object_name(experiment_id, component)
    metadata = _metadata(defaults, experiment_id, name, component, spec)
    template = _pod_template(spec, experiment_id, component, defaults)
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
        governing = ranks_service(metadata, selector["matchLabels"])["metadata"]["name"] if _multi_node_trainer(spec, component, chart) else name
        body = {**body, "serviceName": governing, "podManagementPolicy": "Parallel"}
    return {"apiVersion": "apps/v1", "kind": info.workload, "metadata": metadata, "spec": body}


def render_experiment_objects(
    spec: ExperimentSpec,
    experiment_id: str,
    chart_defaults: ChartDefaults | Mapping[str, Any],
    *,
    llm_egress: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every Kubernetes object of one experiment, in creation order (network policies first, so no
    pod ever runs unconfined; then config, services, disruption budgets, workloads).

    ``llm_egress``: NetworkPolicy egress rules of the value evaluator (the tenant's LLM endpoints).

    Raises :class:`SpecError` naming the field when the spec's placement cannot be scheduled as
    written (a request above its limit, GPUs not matching the policy trainer's processes), and
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
    resolved = resolved_spec(spec, defaults)
    components = component_names(resolved)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(defaults, experiment_id, object_name(experiment_id, "spec"), None, resolved),
        "data": {"spec.json": resolved.model_dump_json(indent=1)},
    }
    services = [_service(resolved, experiment_id, component, defaults) for component in components]
    trainer = Component.policy_trainer
    if _multi_node_trainer(resolved, trainer, defaults.components.policy_trainer):
        name = object_name(experiment_id, trainer)
        services.append(ranks_service(_metadata(defaults, experiment_id, name, trainer, resolved),
                                      selector_labels(defaults, experiment_id, trainer)))
    workloads = [_workload(resolved, experiment_id, component, defaults) for component in components]
    multi_node = _multi_node_trainer(resolved, trainer, defaults.components.policy_trainer)
    policies, budgets = [], []
    for component, workload in zip(components, workloads, strict=True):
        metadata = _metadata(
            defaults, experiment_id, object_name(experiment_id, component), component, resolved
        )
        peers = collective_peers(resolved, component, multi_node)
        policies.append(network_policy(experiment_id, component, defaults, metadata, llm_egress or [], peers))
        budgets.append(
            disruption_budget(
                experiment_id, component, int(workload["spec"].get("replicas", 1)), defaults, metadata
            )
        )
    return [*[p for p in policies if p], config_map, *services, *[b for b in budgets if b], *workloads]
