"""The pod template of one experiment component: its command, environment, probes, volumes and
security context (the non-root uid every lecritique image runs as)."""

from __future__ import annotations

import json
import math
import posixpath
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.config.placement import ComponentPlacement
from lecritique.critics.kinds import critic_kind
from lecritique.launch.components import (
    COMPONENTS,
    GRPC_PORT,
    METRICS_PORT,
    ChartDefaults,
    Component,
    ComponentDefaults,
    VerifierSandbox,
)
from lecritique.launch.kubernetes.multinode import node_rank_env, torchrun_command, trainer_layout
from lecritique.launch.kubernetes.names import (
    EXPERIMENT_NAME_ANNOTATION,
    component_names,
    object_labels,
    object_name,
)
from lecritique.launch.kubernetes.resources import merge_resources

WEIGHTS_MOUNT = "/weights"
SPEC_MOUNT = "/etc/lecritique/spec"
RUN_AS_USER = 10001
"""The non-root uid of both lecritique images (services/Dockerfile, services/api/Dockerfile)."""


def _secret_env(spec: ExperimentSpec, component: Component) -> list[dict[str, Any]]:
    """Secrets the critic kind needs in the value evaluator (e.g. the frozen LLM's API key)."""
    if component != Component.value_evaluator or spec.critic is None:
        return []
    needs = critic_kind(spec.critic).pod_needs(spec.critic)
    return [
        {"name": s.variable, "valueFrom": {"secretKeyRef": {"name": s.secret, "key": s.key}}}
        for s in needs.evaluator_secrets
    ]


REDIS_USER_SECRET_KEY = "password"
"""Key of the password in an experiment's own Redis Secret (:func:`redis_user_secret_name`)."""


def redis_user_secret_name(experiment_id: str) -> str:
    """The Secret holding the password of the experiment's own Redis user (the launcher creates it)."""
    return f"{experiment_id}-redis"


def redis_env(defaults: ChartDefaults, own_user: str | None = None) -> list[dict[str, Any]]:
    """``REDIS_URL`` of experiment pods: as the experiment's own ACL user (``own_user``: the experiment
    id, :class:`lecritique.launch.redis_acl.ExperimentUsers`, its password in the experiment's Secret),
    else as the chart's experiments user when the chart set Redis auth.

    The password comes from a Secret and is spliced in by Kubernetes' ``$(VAR)`` expansion, so it
    appears in no workload the launcher creates.
    """
    auth = defaults.redis_auth
    if auth is None:
        return [{"name": "REDIS_URL", "value": defaults.redis_url}]
    scheme, _, rest = defaults.redis_url.partition("://")
    secret, key, username = (
        (redis_user_secret_name(own_user), REDIS_USER_SECRET_KEY, own_user)
        if own_user is not None
        else (auth.secret_name, auth.password_key, auth.username)
    )
    password = {
        "name": "LECRITIQUE_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": secret, "key": key}},
    }
    return [
        password,
        {"name": "REDIS_URL", "value": f"{scheme}://{username}:$(LECRITIQUE_REDIS_PASSWORD)@{rest}"},
    ]


def _env(
    defaults: ChartDefaults,
    chart: ComponentDefaults,
    experiment_id: str,
    from_spec: list[dict[str, Any]],
    redis: bool = True,
) -> list[dict[str, Any]]:
    """Built-in variables, then the chart's extra env (it may override them), then what the spec
    asks for, which never replaces a variable already set (the API also refuses reserved names).
    ``redis`` False: no Redis URL nor password (the environment verifier uses no Redis, and runs
    scorers on what the policy writes)."""
    builtin: list[dict[str, Any]] = [
        *(redis_env(defaults) if redis else []),
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


ORCHESTRATOR_FLAGS = (
    ("--rollout", Component.rollout),
    ("--environment", Component.environment_verifier),
    ("--policy-trainer", Component.policy_trainer),
    ("--value-evaluator", Component.value_evaluator),
    ("--value-trainer", Component.value_trainer),
)
"""The orchestrator's address flag of each service it calls."""


def _orchestrate_command(spec: ExperimentSpec, experiment_id: str) -> list[str]:
    names = component_names(spec)
    command = [
        "lecritique",
        "orchestrate",
        "--spec",
        f"{SPEC_MOUNT}/spec.json",
        "--out",
        f"{WEIGHTS_MOUNT}/experiments/{experiment_id}/run",
        "--experiment",
        experiment_id,
        "--weights-dir",
        WEIGHTS_MOUNT,
        "--metrics-port",
        str(METRICS_PORT),
    ]
    for flag, target in ORCHESTRATOR_FLAGS:
        if target in names:
            command += [flag, f"{object_name(experiment_id, target)}:{GRPC_PORT}"]
    return command


def container_command(
    spec: ExperimentSpec, experiment_id: str, component: Component, defaults: ChartDefaults
) -> list[str]:
    """What the component's container runs: ``lecritique orchestrate`` or ``lecritique serve NAME``
    (one image holds every gRPC service and the orchestrator; the command picks one)."""
    if component == Component.orchestrator:
        return _orchestrate_command(spec, experiment_id)
    serve_name = COMPONENTS[component].serve_name
    assert serve_name is not None
    serve = [
        "lecritique",
        "serve",
        serve_name,
        "--spec",
        f"{SPEC_MOUNT}/spec.json",
        "--port",
        str(GRPC_PORT),
        "--metrics-port",
        str(METRICS_PORT),
        "--experiment",
        experiment_id,
        "--weights-dir",
        WEIGHTS_MOUNT,
        "--state-dir",
        f"{WEIGHTS_MOUNT}/experiments/{experiment_id}/state",
        "--host",
        "0.0.0.0",
    ]
    layout = trainer_layout(spec, component, defaults.components.of(component).gpus_per_node)
    if layout.processes > 1:
        # Rank 0 serves gRPC; the other ranks (on this pod or on the StatefulSet's other pods) join its group.
        return torchrun_command(layout, object_name(experiment_id, component), defaults.namespace, serve)
    return serve


def multi_node_trainer(spec: ExperimentSpec, component: Component, chart: ComponentDefaults) -> bool:
    """Whether this is a trainer spread over several pods (more processes than GPUs per node)."""
    return trainer_layout(spec, component, chart.gpus_per_node).multi_node


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


CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "runAsGroup": RUN_AS_USER,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
"""Every container's securityContext (the images run as RUN_AS_USER; caches go to /tmp)."""
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "runAsGroup": RUN_AS_USER,
    "fsGroup": RUN_AS_USER,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Every pod's securityContext."""


def weights_mounts(component: Component, dataset_roots: tuple[str, ...]) -> list[dict[str, Any]]:
    """Where the component sees the weight volume.

    Every component but the environment verifier mounts all of it read-write (weights, checkpoints,
    run files). The verifier runs code a policy wrote (CodeIO, reasoning-gym scorers) and only reads
    datasets: it mounts read-only, and only its tenant's dataset roots that lie on the volume (one
    ``subPath`` each); without dataset roots (no tenant confinement), the whole volume read-only.
    """
    if component != Component.environment_verifier:
        return [{"name": "weights", "mountPath": WEIGHTS_MOUNT}]
    if not dataset_roots:
        return [{"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True}]
    on_volume = sorted(
        {
            root
            for root in (posixpath.normpath(r) for r in dataset_roots)
            if root == WEIGHTS_MOUNT or root.startswith(WEIGHTS_MOUNT + "/")
        }
    )
    # A root inside another is visible through the outer mount already.
    outermost = [r for r in on_volume if not any(r.startswith(o + "/") for o in on_volume if o != r)]
    return [
        {"name": "weights", "mountPath": root, "readOnly": True}
        | ({"subPath": posixpath.relpath(root, WEIGHTS_MOUNT)} if root != WEIGHTS_MOUNT else {})
        for root in outermost
    ]


def _volumes(
    experiment_id: str,
    component: Component,
    chart: ComponentDefaults,
    defaults: ChartDefaults,
    dataset_roots: tuple[str, ...],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the container's mounts: weights, the spec, /tmp, and /dev/shm if sized."""
    mounts: list[dict[str, Any]] = [
        *weights_mounts(component, dataset_roots),
        {"name": "spec", "mountPath": SPEC_MOUNT, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "spec", "configMap": {"name": object_name(experiment_id, "spec")}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if any(mount["name"] == "weights" for mount in mounts):
        volumes.insert(0, {"name": "weights", "persistentVolumeClaim": {"claimName": defaults.weights_claim}})
    if chart.shm_size is not None:
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": chart.shm_size}})
    return volumes, mounts


def _security(
    component: Component, sandbox: VerifierSandbox
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(pod securityContext, container securityContext, other pod fields) of the component.

    The environment verifier with ``sandbox.namespaces``: the Localhost seccomp profile that lets
    the sandbox unshare and mount (helm/lecritique/files/), a pod user namespace and an unmasked
    ``/proc`` (a user namespace may mount a fresh procfs only where no path of /proc is masked).
    """
    pod, container = dict(POD_SECURITY), dict(CONTAINER_SECURITY)
    if component != Component.environment_verifier or not sandbox.namespaces:
        return pod, container, {}
    pod["seccompProfile"] = {"type": "Localhost", "localhostProfile": sandbox.seccomp_profile}
    container["procMount"] = "Unmasked"
    if sandbox.app_armor_profile:
        container["appArmorProfile"] = {"type": "Localhost", "localhostProfile": sandbox.app_armor_profile}
    return pod, container, {"hostUsers": False}


def _container(
    spec: ExperimentSpec,
    experiment_id: str,
    component: Component,
    defaults: ChartDefaults,
    mounts: list[dict[str, Any]],
    security: dict[str, Any],
) -> dict[str, Any]:
    chart = defaults.components.of(component)
    placed: ComponentPlacement = getattr(spec.placement, COMPONENTS[component].placement_key)
    ports = [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}]
    if component != Component.orchestrator:
        ports.insert(0, {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"})
    return {
        "name": component.value,
        "image": chart.image,
        "imagePullPolicy": chart.image_pull_policy,
        "command": container_command(spec, experiment_id, component, defaults),
        # A multi-pod trainer learns its node rank from its pod index.
        "env": _env(
            defaults,
            chart,
            experiment_id,
            [
                *_secret_env(spec, component),
                *([node_rank_env()] if multi_node_trainer(spec, component, chart) else []),
            ],
            redis=component != Component.environment_verifier,
        ),
        "ports": ports,
        "resources": merge_resources(component, chart, placed, spec),
        **_probes(component, chart),
        "securityContext": security,
        "volumeMounts": mounts,
    }


def _scheduling(spec: ExperimentSpec, component: Component, chart: ComponentDefaults) -> dict[str, Any]:
    """nodeSelector, tolerations and affinity: the spec's placement where set, else the chart's."""
    placed: ComponentPlacement = getattr(spec.placement, COMPONENTS[component].placement_key)
    node_selector = placed.node_selector if placed.node_selector is not None else chart.node_selector
    tolerations = (
        [t.to_kubernetes() for t in placed.tolerations]
        if placed.tolerations is not None
        else [dict(t) for t in chart.tolerations]
    )
    affinity = placed.affinity if placed.affinity is not None else chart.affinity
    out: dict[str, Any] = {}
    if node_selector:
        out["nodeSelector"] = dict(node_selector)
    if tolerations:
        out["tolerations"] = tolerations
    if affinity:
        out["affinity"] = json.loads(json.dumps(affinity))
    return out


def pod_template(
    spec: ExperimentSpec,
    experiment_id: str,
    component: Component,
    defaults: ChartDefaults,
    dataset_roots: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The pod template of one component's workload (``dataset_roots``: :func:`weights_mounts`)."""
    chart = defaults.components.of(component)
    volumes, mounts = _volumes(experiment_id, component, chart, defaults, dataset_roots)
    pod_security, container_security, pod_fields = _security(component, defaults.verifier_sandbox)
    pod_spec: dict[str, Any] = {
        "serviceAccountName": defaults.service_account_name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 60,
        **pod_fields,
        "securityContext": pod_security,
        "containers": [_container(spec, experiment_id, component, defaults, mounts, container_security)],
        "volumes": volumes,
        **_scheduling(spec, component, chart),
    }
    if defaults.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in defaults.image_pull_secrets]
    if component == Component.orchestrator:
        pod_spec["restartPolicy"] = "OnFailure"
    return {
        "metadata": {
            "labels": object_labels(defaults, experiment_id, component),
            "annotations": {EXPERIMENT_NAME_ANNOTATION: spec.name},
        },
        "spec": pod_spec,
    }
