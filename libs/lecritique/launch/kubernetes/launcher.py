"""The ``kubernetes`` launcher: create, watch and delete one experiment's objects.

It creates what :func:`lecritique.launch.kubernetes.render.render_experiment_objects` renders, reads the
orchestrator Job's status, and deletes the experiment's objects by listing them with the
experiment's label selector and deleting each by name (with its uid as a precondition). It needs
exactly the permissions in :data:`REQUIRED_RULES`; the chart's Role grants these and no more, and
its ValidatingAdmissionPolicy lets the API's service account create and delete only objects
labelled ``app.kubernetes.io/managed-by: lecritique-api`` (RBAC alone cannot scope by label).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from lecritique.launch.base import LogNotFound, Observation, Submission, Usage
from lecritique.launch.components import COMPONENTS, EXPERIMENT_LABEL, ChartDefaults, Component
from lecritique.launch.kubernetes.pods import redis_user_secret_name
from lecritique.launch.kubernetes.render import object_name, render_experiment_objects
from lecritique.launch.kubernetes.resources import resource_totals

logger = logging.getLogger(__name__)

WorkloadState = Literal["pending", "running", "succeeded", "failed", "missing"]

# (apiVersion, kind) -> (API class name, resource, snake-case kind of the client's method names)
_KINDS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("v1", "ConfigMap"): ("CoreV1Api", "configmaps", "config_map"),
    ("v1", "Service"): ("CoreV1Api", "services", "service"),
    ("apps/v1", "Deployment"): ("AppsV1Api", "deployments", "deployment"),
    ("apps/v1", "StatefulSet"): ("AppsV1Api", "statefulsets", "stateful_set"),
    ("batch/v1", "Job"): ("BatchV1Api", "jobs", "job"),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("NetworkingV1Api", "networkpolicies", "network_policy"),
    ("policy/v1", "PodDisruptionBudget"): ("PolicyV1Api", "poddisruptionbudgets", "pod_disruption_budget"),
    ("v1", "Secret"): ("CoreV1Api", "secrets", "secret"),
}
# Workloads go first on teardown so that no pod outlives the Services, ConfigMap and policies it uses.
_DELETE_ORDER = [
    ("batch/v1", "Job"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
]

REQUIRED_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["create", "list", "delete"]},
    {
        "apiGroups": ["apps"],
        "resources": ["deployments", "statefulsets"],
        "verbs": ["create", "list", "delete"],
    },
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "list", "delete", "get"]},
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["create", "list", "delete"],
    },
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["create", "list", "delete"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete"]},
]
"""The RBAC rules the launcher's calls need: create objects, read the orchestrator Job, list by label
and delete by name, find an experiment's pods and read their logs. No ``deletecollection``: that verb deletes whatever matches, label or not.
Secrets (an experiment's own Redis password) are created and deleted by name, never listed or read:
``list`` on Secrets would return every Secret's data, the tenants' API keys included."""


@dataclass(frozen=True)
class JobStatus:
    state: WorkloadState
    """Where the orchestrator Job is."""
    message: str = ""
    """Why it failed (the Job's Failed condition), if it did."""


def gpus_of(objects: list[dict[str, Any]]) -> int:
    """GPUs (any ``*/gpu`` extended resource) the workloads request over all their pods."""
    total = 0
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        replicas = int(obj["spec"].get("replicas", 1))
        for container in obj["spec"]["template"]["spec"]["containers"]:
            limits = container.get("resources", {}).get("limits", {})
            total += replicas * sum(
                int(float(value)) for name, value in limits.items() if name.endswith("/gpu")
            )
    return total


def chart_placement(defaults: ChartDefaults) -> dict[str, dict[str, Any]]:
    """Each placement section's node selector, tolerations and affinity in the chart's defaults."""
    placement = {}
    for component, info in COMPONENTS.items():
        chart = defaults.components.of(component)
        placement[info.placement_key] = {
            "node_selector": dict(chart.node_selector),
            "tolerations": [dict(t) for t in chart.tolerations],
            "affinity": dict(chart.affinity),
        }
    return placement


def usage_of(objects: list[dict[str, Any]], defaults: ChartDefaults) -> Usage:
    """What an experiment's rendered objects take from the cluster (the tenant's quotas read it):
    the API's launcher and ``lecritique chart render --experiment --tenant`` compute it alike."""
    return Usage(
        gpus=gpus_of(objects),
        cpus=resource_totals(objects, "cpu"),
        memory=resource_totals(objects, "memory"),
        chart_placement=chart_placement(defaults),
    )


class KubernetesLauncher:
    """Runs experiments as Kubernetes objects in the release's namespace."""

    name = "kubernetes"
    secrets_are: Literal["kubernetes", "environment"] = "kubernetes"

    def __init__(self, defaults: ChartDefaults, api_client: Any | None = None) -> None:
        from kubernetes import client, config

        self.defaults = defaults
        if api_client is None:
            try:
                config.load_incluster_config()  # type: ignore[no-untyped-call]
            except config.ConfigException:
                config.load_kube_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
        self.api_client = api_client
        self._apis: dict[str, Any] = {}

    @classmethod
    def from_files(cls, defaults_path: Path, namespace: str | None = None) -> KubernetesLauncher:
        """The launcher for the chart's launcher-defaults.json (``namespace`` overrides the file's)."""
        defaults = ChartDefaults.model_validate_json(Path(defaults_path).read_text())
        if namespace:
            defaults = defaults.model_copy(update={"namespace": namespace})
        return cls(defaults)

    def _api(self, class_name: str) -> Any:
        from kubernetes import client

        if class_name not in self._apis:
            self._apis[class_name] = getattr(client, class_name)(self.api_client)
        return self._apis[class_name]

    @property
    def runs_redis_url(self) -> str | None:
        """Where experiment pods connect, as their own users (the API creates them); None without
        Redis auth in the chart (no users to create)."""
        return self.defaults.redis_url if self.defaults.redis_auth is not None else None

    def render(self, submission: Submission) -> list[dict[str, Any]]:
        password = urlsplit(submission.redis_url).password if submission.redis_url else None
        return render_experiment_objects(
            submission.spec,
            submission.experiment_id,
            self.defaults,
            llm_egress=list(submission.policy.llm_egress),
            tracker_egress=list(submission.policy.tracker_egress),
            dataset_roots=submission.dataset_roots,
            redis_password=password,
        )

    def check(self, submission: Submission) -> Usage:
        return usage_of(self.render(submission), self.defaults)

    def launch(self, submission: Submission) -> dict[str, Any]:
        """Create every object; ones that already exist (a retried launch) are left as they are."""
        from kubernetes.client.exceptions import ApiException

        for obj in self.render(submission):
            class_name, _, kind = _KINDS[(obj["apiVersion"], obj["kind"])]
            create = getattr(self._api(class_name), f"create_namespaced_{kind}")
            try:
                create(self.defaults.namespace, obj)
            except ApiException as error:
                if error.status != 409:
                    raise
                logger.info("%s %s already exists", obj["kind"], obj["metadata"]["name"])
        logger.info(
            "launched experiment %s in namespace %s", submission.experiment_id, self.defaults.namespace
        )
        return {"namespace": self.defaults.namespace}

    def job_status(self, experiment_id: str) -> JobStatus:
        """State of the experiment's orchestrator Job."""
        from kubernetes.client.exceptions import ApiException

        try:
            job = self._api("BatchV1Api").read_namespaced_job(
                object_name(experiment_id, Component.orchestrator), self.defaults.namespace
            )
        except ApiException as error:
            if error.status == 404:
                return JobStatus("missing")
            raise
        for condition in job.status.conditions or []:
            if condition.status != "True":
                continue
            if condition.type == "Complete":
                return JobStatus("succeeded")
            if condition.type == "Failed":
                return JobStatus("failed", f"{condition.reason}: {condition.message}")
        return JobStatus("running" if (job.status.active or 0) > 0 else "pending")

    def delete(self, experiment_id: str, *, keep_job: bool = False) -> None:
        """Delete every object of the experiment (``keep_job``: all but the finished orchestrator Job)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        selector = f"{EXPERIMENT_LABEL}={experiment_id},app.kubernetes.io/instance={self.defaults.release}"
        for key in _DELETE_ORDER:
            class_name, _, kind = _KINDS[key]
            if keep_job and kind == "job":
                continue
            api = self._api(class_name)
            found = getattr(api, f"list_namespaced_{kind}")(self.defaults.namespace, label_selector=selector)
            for item in found.items:
                options = client.V1DeleteOptions(
                    propagation_policy="Background",
                    preconditions=client.V1Preconditions(uid=item.metadata.uid),
                )
                try:
                    getattr(api, f"delete_namespaced_{kind}")(
                        item.metadata.name, self.defaults.namespace, body=options
                    )
                except ApiException as error:
                    if error.status not in (
                        404,
                        409,
                    ):  # gone already, or replaced by a newer object of that name
                        raise
        self._delete_redis_secret(experiment_id)
        logger.info(
            "deleted the objects of experiment %s%s", experiment_id, " (kept its Job)" if keep_job else ""
        )

    def _delete_redis_secret(self, experiment_id: str) -> None:
        """Delete the experiment's Redis password by name (the admission policy checks its labels)."""
        from kubernetes.client.exceptions import ApiException

        try:
            self._api("CoreV1Api").delete_namespaced_secret(
                redis_user_secret_name(experiment_id), self.defaults.namespace
            )
        except ApiException as error:
            if error.status != 404:  # none: launched without Redis auth, or deleted already
                raise

    def poll(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        status = self.job_status(experiment_id)
        if status.state in ("pending", "running"):
            return Observation("running")
        if status.state == "missing":
            return Observation("failed", "the orchestrator Job no longer exists")
        return Observation("succeeded" if status.state == "succeeded" else "failed", status.message or None)

    def cancel(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        self.delete(experiment_id)
        return Observation("cancelled")

    def release(self, experiment_id: str, handle: dict[str, Any]) -> None:
        # Keep the finished Job for its logs (it expires by itself); free the GPUs now.
        self.delete(experiment_id, keep_job=True)

    def logs(self, experiment_id: str, handle: dict[str, Any], component: str, tail: int) -> str:
        """A pod's log: ``orchestrator``, or a component with the pod's ordinal (``rollout-0``; sorted
        by pod name, so a StatefulSet's ordinals), ``run`` being the orchestrator's."""
        from kubernetes.client.exceptions import ApiException

        name, _, ordinal = component.rpartition("-") if component[-1:].isdigit() else (component, "", "0")
        name = "orchestrator" if name == "run" else name
        selector = (
            f"{EXPERIMENT_LABEL}={experiment_id},app.kubernetes.io/instance={self.defaults.release},"
            f"app.kubernetes.io/component={name}"
        )
        core = self._api("CoreV1Api")
        pods = sorted(
            pod.metadata.name
            for pod in core.list_namespaced_pod(self.defaults.namespace, label_selector=selector).items
        )
        if int(ordinal) >= len(pods):
            everything = (
                f"{EXPERIMENT_LABEL}={experiment_id},app.kubernetes.io/instance={self.defaults.release}"
            )
            found = core.list_namespaced_pod(self.defaults.namespace, label_selector=everything).items
            known = sorted(
                {str((pod.metadata.labels or {}).get("app.kubernetes.io/component")) for pod in found}
            )
            raise LogNotFound(
                f"no pod for {component!r} (components with pods: {', '.join(known) or 'none yet'})"
            )
        try:
            text: str = core.read_namespaced_pod_log(
                pods[int(ordinal)], self.defaults.namespace, tail_lines=tail
            )
        except ApiException as error:
            if error.status in (400, 404):  # the container has not started, or the pod has just gone
                raise LogNotFound(f"no log for {component!r} yet: {error.reason}") from None
            raise
        return text
