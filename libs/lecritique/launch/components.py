"""The components of one experiment and the chart's per-component defaults for them.

The Helm chart renders ``launcher-defaults.json`` (a ConfigMap mounted into the API pod) from its
values; :class:`ChartDefaults` is its typed form. Keys are camelCase, as in ``values.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GRPC_PORT = 50051
"""gRPC port of every service pod."""
METRICS_PORT = 9090
"""Prometheus /metrics port of every experiment pod."""
EXPERIMENT_LABEL = "lecritique.dev/experiment"
"""Label naming the experiment id on every object the launcher creates."""


class Component(StrEnum):
    """A workload of one experiment; the value is its ``app.kubernetes.io/component`` label."""

    orchestrator = "orchestrator"
    rollout = "rollout"
    environment_verifier = "environment-verifier"
    value_evaluator = "value-evaluator"
    value_trainer = "value-trainer"
    policy_trainer = "policy-trainer"


@dataclass(frozen=True)
class ComponentInfo:
    serve_name: str | None
    """``lecritique serve`` argument (None: the orchestrator, ``lecritique orchestrate``)."""
    workload: Literal["Job", "Deployment", "StatefulSet"]
    """Controller kind of its pods."""
    values_key: str
    """Its values block in the Helm chart."""
    placement_key: str
    """Its section of the spec's ``placement``."""


COMPONENTS: dict[Component, ComponentInfo] = {
    Component.orchestrator: ComponentInfo(None, "Job", "orchestrator", "orchestrator"),
    Component.rollout: ComponentInfo("rollout", "Deployment", "rollout", "rollout"),
    Component.environment_verifier: ComponentInfo(
        "environment", "Deployment", "environmentVerifier", "environment_verifier"
    ),
    Component.value_evaluator: ComponentInfo(
        "value-evaluator", "Deployment", "valueEvaluator", "value_evaluator"
    ),
    Component.value_trainer: ComponentInfo("value-trainer", "StatefulSet", "valueTrainer", "value_trainer"),
    Component.policy_trainer: ComponentInfo(
        "policy-trainer", "StatefulSet", "policyTrainer", "policy_trainer"
    ),
}


class _ChartModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


class ResourceDefaults(_ChartModel):
    requests: dict[str, str] = Field(default_factory=dict)
    """Default requests (quantity strings) of the component's container."""
    limits: dict[str, str] = Field(default_factory=dict)
    """Default limits, e.g. ``nvidia.com/gpu``."""


class ComponentDefaults(_ChartModel):
    image: str
    """Full image reference (``repository:tag``)."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    """Kubernetes image pull policy."""
    replicas: int = Field(default=1, ge=1)
    """Pods when the spec does not say (rollout.replicas / critic.evaluator_replicas / placement)."""
    resources: ResourceDefaults = Field(default_factory=ResourceDefaults)
    """Default requests and limits."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Default node labels (the component's node pool)."""
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    """Default tolerations (Kubernetes API form)."""
    affinity: dict[str, Any] = Field(default_factory=dict)
    """Default affinity (Kubernetes API form)."""
    env: list[dict[str, Any]] = Field(default_factory=list)
    """Extra container environment variables (Kubernetes EnvVar form); they override built-in ones by name."""
    shm_size: str | None = None
    """Size of an in-memory /dev/shm (NCCL, vLLM and torch workers need more than the 64 MiB default); None: none."""
    startup_seconds: int = Field(default=900, ge=10)
    """How long the pod may take to start serving (model load, vLLM warm-up) before it is restarted."""
    gpus_per_node: int | None = Field(default=None, ge=1)
    """GPUs of one node of this component's pool; a policy trainer with more processes spans several pods."""


class ComponentsDefaults(_ChartModel):
    orchestrator: ComponentDefaults
    """The experiment loop Job."""
    rollout: ComponentDefaults
    """Policy inference."""
    environment_verifier: ComponentDefaults
    """Environments and verifiers."""
    value_evaluator: ComponentDefaults
    """Critic inference."""
    value_trainer: ComponentDefaults
    """Critic trainer."""
    policy_trainer: ComponentDefaults
    """Policy trainer."""

    def of(self, component: Component) -> ComponentDefaults:
        value: ComponentDefaults = getattr(self, COMPONENTS[component].placement_key)
        return value


class RedisAuth(_ChartModel):
    """How experiment pods authenticate to the release's Redis (an ACL user that sees only experiment keys)."""

    secret_name: str
    """Secret holding the password."""
    password_key: str = "experiments-password"
    """Key of the password in that Secret."""
    username: str = "experiments"
    """Redis ACL user of experiment pods."""


class VerifierSandbox(_ChartModel):
    """How environment-verifier pods let the CodeIO sandbox create its namespaces (docs/security.md).

    Off (the default): the runtime's default seccomp profile (``RuntimeDefault``); under containerd's
    and Docker's, ``unshare`` is refused to a container without CAP_SYS_ADMIN, so the sandbox runs
    with its base layers only (rlimits, no root, no capabilities, no_new_privs, its own seccomp).
    """

    namespaces: bool = False
    """Run the verifier under :attr:`seccomp_profile` (``Localhost``), in a user namespace
    (``hostUsers: false``) with ``/proc`` unmasked (``procMount: Unmasked``): what the sandbox needs to
    unshare, mount its private root and a fresh ``/proc``."""
    seccomp_profile: str = "lecritique/sandbox-namespaces.json"
    """The Localhost seccomp profile, relative to the kubelet's seccomp root; the chart's
    ``sandboxProfiles.install`` DaemonSet writes it there."""
    app_armor_profile: str = ""
    """A loaded AppArmor profile for the verifier container (``Localhost``); "" leaves the runtime's
    default (which denies ``mount`` on nodes with AppArmor)."""


class ChartDefaults(_ChartModel):
    """What the chart tells the kubernetes launcher: where to create objects and their defaults."""

    release: str
    """Helm release name (the ``app.kubernetes.io/instance`` label of every object)."""
    namespace: str
    """Namespace of the release; experiment objects are created there."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels put on every experiment object (and pod) besides the launcher's own."""
    redis_url: str
    """The release's Redis (replay, weight announcements, metrics series), without credentials."""
    redis_auth: RedisAuth | None = None
    """Credentials of experiment pods for that Redis (None: it needs none)."""
    weights_claim: str
    """ReadWriteMany PersistentVolumeClaim holding the weight store, mounted at /weights."""
    service_account_name: str
    """Service account of experiment pods (no Kubernetes API access)."""
    image_pull_secrets: list[str] = Field(default_factory=list)
    """Names of image pull secrets."""
    orchestrator_backoff_limit: int = Field(default=6, ge=0)
    """Restarts of a failed orchestrator (it resumes from its checkpoint) before the experiment fails."""
    finished_job_ttl_seconds: int = Field(default=7 * 24 * 3600, ge=0)
    """Keep a finished orchestrator Job (and its logs) this long."""
    components: ComponentsDefaults
    """Per-component defaults (the chart's ``rollout``, ``valueEvaluator``, ... values blocks)."""
    verifier_sandbox: VerifierSandbox = Field(default_factory=VerifierSandbox)
    """The environment verifier's seccomp/AppArmor profile and user namespace (``environmentVerifier.sandbox``)."""
