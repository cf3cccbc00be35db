"""The interface every experiment launcher implements (the REST API drives launchers through it).

A launcher turns a validated spec into running workloads and back: :meth:`~ExperimentLauncher.check`
rejects specs it could not run (before anything is recorded) and says what the experiment would
use, :meth:`~ExperimentLauncher.launch` starts it and returns a small JSON handle kept in the
experiment record, :meth:`~ExperimentLauncher.poll` reports where it stands,
:meth:`~ExperimentLauncher.cancel` stops it, :meth:`~ExperimentLauncher.release` frees what a
finished experiment still holds, and :meth:`~ExperimentLauncher.logs` reads the tail of a component's log.

Implementations: :class:`lecritique.launch.api_local.launcher.LocalProcessLauncher` (``lecritique run``
under a supervisor, on this machine) and :class:`lecritique.launch.kubernetes.launcher.KubernetesLauncher`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, Protocol

from lecritique.config.experiment import ExperimentSpec, SpecError
from lecritique.tenancy.policy import TenantPolicy

LaunchState = Literal["running", "succeeded", "failed", "cancelled"]


@dataclass(frozen=True)
class Observation:
    state: LaunchState
    """Where the experiment's workloads stand."""
    message: str | None = None
    """Why it failed, when it did."""


@dataclass(frozen=True)
class Submission:
    """One experiment to check or launch, with whose it is and what its tenant may use."""

    experiment_id: str
    """The experiment id (a short DNS label: names objects, Redis keys and metric labels)."""
    spec: ExperimentSpec
    """The validated spec."""
    tenant: str
    """Owner."""
    policy: TenantPolicy
    """The owner's allow-lists and quotas."""
    dataset_roots: tuple[str, ...] = ()
    """Folders the experiment's datasets must lie in, checked again where a file is opened
    (``LECRITIQUE_DATASET_ROOTS``); empty: unconfined."""
    redis_url: str | None = None
    """The Redis URL of the experiment's own ACL user (:class:`lecritique.launch.redis_acl.ExperimentUsers`),
    set when it is launched; None: the launcher's shared URL."""


@dataclass(frozen=True)
class Usage:
    """What an experiment would take from the cluster, as the launcher would create it."""

    gpus: int = 0
    """GPUs over every pod (0 for local processes)."""
    cpus: tuple[Decimal, Decimal] = (Decimal(0), Decimal(0))
    """CPU cores requested and the sum of the CPU limits, over every pod (replicas x per pod)."""
    memory: tuple[Decimal, Decimal] = (Decimal(0), Decimal(0))
    """Memory bytes requested and the sum of the memory limits, over every pod."""
    chart_placement: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Placement section (``rollout``, ...) -> the ``node_selector``, ``tolerations`` and ``affinity``
    the operator's chart gives that component's pods: a spec may always restate them (empty: none)."""


class OutsideRoots(SpecError):
    """A path of the spec resolves (symbolic links followed) outside what the tenant's policy allows:
    refused like the policy's own checks (403), not as a malformed spec."""

    def __init__(self, message: str, rule: str = "") -> None:
        super().__init__(message)
        self.rule = rule
        """The spec rule of the path (``model_path``, ``dataset_path``)."""


class LogNotFound(LookupError):
    """The experiment has no log of that component (yet); the message lists the ones it has."""


class ExperimentLauncher(Protocol):
    name: str
    """``local`` or ``kubernetes``."""
    secrets_are: Literal["kubernetes", "environment"]
    """What a spec's API-key reference names: a Kubernetes Secret or a variable of the API process."""

    def check(self, submission: Submission) -> Usage:
        """Raise :class:`~lecritique.config.experiment.SpecError` ('<field>: <message>') if this
        launcher cannot run the spec; else what it would use."""

    def launch(self, submission: Submission) -> dict[str, Any]:
        """Start the experiment; returns the handle stored in its record."""

    def poll(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        """Current state of a launched experiment."""

    def cancel(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        """Start stopping it; ``cancelled`` once nothing of it runs any more, else ``running``."""

    def release(self, experiment_id: str, handle: dict[str, Any]) -> None:
        """Free what a finished experiment still holds (idempotent)."""

    def logs(self, experiment_id: str, handle: dict[str, Any], component: str, tail: int) -> str:
        """The last ``tail`` lines of one component's log (``run``, ``orchestrator``, ``rollout-0``, ...);
        raise :class:`LogNotFound` naming the components that have one."""
