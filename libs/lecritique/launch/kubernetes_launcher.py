"""The ``kubernetes`` launcher: create, watch and delete one experiment's objects.

It creates what :func:`lecritique.launch.kubernetes.render_experiment_objects` renders, reads the
orchestrator Job's status, and deletes every object labelled with the experiment id. It needs
exactly the permissions in :data:`REQUIRED_RULES` (the Helm chart's Role grants these and no more).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from lecritique.config.experiment import ExperimentSpec
from lecritique.launch.components import ChartDefaults, Component
from lecritique.launch.kubernetes import EXPERIMENT_LABEL, object_name, render_experiment_objects

logger = logging.getLogger(__name__)

WorkloadState = Literal["pending", "running", "succeeded", "failed", "missing"]

# (apiVersion, kind) -> (API class name, resource, snake-case kind of the client's method names)
_KINDS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("v1", "ConfigMap"): ("CoreV1Api", "configmaps", "config_map"),
    ("v1", "Service"): ("CoreV1Api", "services", "service"),
    ("apps/v1", "Deployment"): ("AppsV1Api", "deployments", "deployment"),
    ("apps/v1", "StatefulSet"): ("AppsV1Api", "statefulsets", "stateful_set"),
    ("batch/v1", "Job"): ("BatchV1Api", "jobs", "job"),
}
# Workloads go first on teardown so that no pod outlives the Services and ConfigMap it uses.
_DELETE_ORDER = [("batch/v1", "Job"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("v1", "Service"), ("v1", "ConfigMap")]

REQUIRED_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["create", "deletecollection"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": ["create", "deletecollection"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "deletecollection", "get"]},
]
"""The RBAC rules the launcher's calls need: create objects, read the orchestrator Job, delete by label."""


@dataclass(frozen=True)
class JobStatus:
    state: WorkloadState
    """Where the orchestrator Job is."""
    message: str = ""
    """Why it failed (the Job's Failed condition), if it did."""


class KubernetesLauncher:
    """Runs experiments as Kubernetes objects in the release's namespace."""

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

    def _api(self, class_name: str) -> Any:
        from kubernetes import client

        if class_name not in self._apis:
            self._apis[class_name] = getattr(client, class_name)(self.api_client)
        return self._apis[class_name]

    def render(self, spec: ExperimentSpec, experiment_id: str) -> list[dict[str, Any]]:
        return render_experiment_objects(spec, experiment_id, self.defaults)

    def launch(self, spec: ExperimentSpec, experiment_id: str) -> None:
        """Create every object; ones that already exist (a retried launch) are left as they are."""
        from kubernetes.client.exceptions import ApiException

        for obj in self.render(spec, experiment_id):
            class_name, _, kind = _KINDS[(obj["apiVersion"], obj["kind"])]
            create = getattr(self._api(class_name), f"create_namespaced_{kind}")
            try:
                create(self.defaults.namespace, obj)
            except ApiException as error:
                if error.status != 409:
                    raise
                logger.info("%s %s already exists", obj["kind"], obj["metadata"]["name"])
        logger.info("launched experiment %s in namespace %s", experiment_id, self.defaults.namespace)

    def job_status(self, experiment_id: str) -> JobStatus:
        """State of the experiment's orchestrator Job."""
        from kubernetes.client.exceptions import ApiException

        try:
            job = self._api("BatchV1Api").read_namespaced_job(object_name(experiment_id, Component.orchestrator), self.defaults.namespace)
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
        selector = f"{EXPERIMENT_LABEL}={experiment_id},app.kubernetes.io/instance={self.defaults.release}"
        for key in _DELETE_ORDER:
            class_name, _, kind = _KINDS[key]
            if keep_job and kind == "job":
                continue
            delete = getattr(self._api(class_name), f"delete_collection_namespaced_{kind}")
            delete(self.defaults.namespace, label_selector=selector, propagation_policy="Background")
        logger.info("deleted the objects of experiment %s%s", experiment_id, " (kept its Job)" if keep_job else "")
