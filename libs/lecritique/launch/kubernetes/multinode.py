"""A trainer over several pods: torchrun rendezvous across the pods of its StatefulSet.

Both trainers run torchrun ranks: the policy trainer (``policy_trainer.processes``) and the
value trainer of a discriminative critic (``critic.processes``). When the processes exceed the
GPUs of one node (the spec's ``processes_per_node``, else the chart's ``gpusPerNode`` of that
trainer), the trainer's StatefulSet gets ``processes / per_pod`` pods, each running
``torchrun --nnodes=P --nproc_per_node=G --node_rank=<pod index>`` with pod 0 as the master
(static rendezvous: pod 0 hosts the TCPStore on :data:`RENDEZVOUS_PORT`). Pods find pod 0 through
a second headless Service, ``ID-policy-trainer-ranks`` (``ID-value-trainer-ranks``), the StatefulSet's governing Service,
which publishes not-ready addresses: the ranks must meet before any of them can be ready. Global
rank 0 (on pod 0) serves gRPC, so the component's gRPC Service selects pod 0 alone; local rank 0
of the other pods serves only the gRPC health service, for their probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.config.findings import Finding, SpecRefused
from lecritique.launch.components import COMPONENTS, Component

RENDEZVOUS_PORT = 29500
"""torchrun's static rendezvous (TCPStore) port on pod 0."""
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
"""Label the StatefulSet controller puts on each pod: its ordinal (Kubernetes >= 1.28)."""
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
"""Label the StatefulSet controller puts on each pod: its name."""
NODE_RANK_ENV = "NODE_RANK"
TRAINERS = (Component.policy_trainer, Component.value_trainer)
"""The components that run torchrun ranks."""


@dataclass(frozen=True)
class TrainerLayout:
    """How a trainer's processes sit on pods."""

    pods: int
    """Pods of the trainer's StatefulSet (torchrun nodes)."""
    per_pod: int
    """Processes (and GPUs) per pod."""

    @property
    def processes(self) -> int:
        return self.pods * self.per_pod

    @property
    def multi_node(self) -> bool:
        return self.pods > 1


def trainer_processes(spec: ExperimentSpec, component: Component) -> tuple[int, int | None, str] | None:
    """``(processes, processes per node set in the spec, the spec section)`` of a trainer; None for other components."""
    if component == Component.policy_trainer:
        trainer = spec.policy_trainer
        return trainer.processes, trainer.processes_per_node, "policy_trainer"
    if component == Component.value_trainer and spec.critic is not None:
        processes, per_node = spec.critic.trainer_processes()
        return processes, per_node, "critic"
    return None


def trainer_layout(spec: ExperimentSpec, component: Component, gpus_per_node: int | None) -> TrainerLayout:
    """Pods and processes per pod of a trainer (one of each for other components).

    Raises :class:`SpecRefused` (a ``cluster`` finding on ``<section>.processes``) if the processes
    do not fill whole pods.
    """
    found = trainer_processes(spec, component)
    if found is None:
        return TrainerLayout(1, 1)
    processes, per_node, section = found
    per_pod = min(per_node or gpus_per_node or processes, processes)
    if processes % per_pod:
        raise SpecRefused(
            [
                Finding(
                    f"{section}.processes",
                    "error",
                    f"{section}.processes: {processes} processes do not fill pods of {per_pod} "
                    f"({section}.processes_per_node, else the chart's {COMPONENTS[component].values_key}"
                    ".gpusPerNode); use a multiple",
                    context="cluster",
                )
            ]
        )
    return TrainerLayout(processes // per_pod, per_pod)


def ranks_service_name(trainer_name: str) -> str:
    """The governing (rendezvous) Service of a multi-pod trainer's StatefulSet."""
    return f"{trainer_name}-ranks"


def torchrun_command(
    layout: TrainerLayout, trainer_name: str, namespace: str, program: list[str]
) -> list[str]:
    """``python -m torch.distributed.run ... -m PROGRAM`` for one pod of the layout.

    One pod: ``--standalone``. Several: static rendezvous at pod 0's stable DNS name; the node
    rank comes from the pod's index (``$(NODE_RANK)`` is expanded by the kubelet).
    """
    if not layout.multi_node:
        return [
            "python",
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={layout.per_pod}",
            "-m",
            *program,
        ]
    master = f"{trainer_name}-0.{ranks_service_name(trainer_name)}.{namespace}.svc"
    return [
        "python",
        "-m",
        "torch.distributed.run",
        f"--nnodes={layout.pods}",
        f"--nproc_per_node={layout.per_pod}",
        f"--node_rank=$({NODE_RANK_ENV})",
        f"--master_addr={master}",
        f"--master_port={RENDEZVOUS_PORT}",
        "-m",
        *program,
    ]


def node_rank_env() -> dict[str, Any]:
    """``NODE_RANK`` from the pod's StatefulSet index (downward API)."""
    return {
        "name": NODE_RANK_ENV,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
    }


def ranks_service(metadata: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    """The headless governing Service that gives every trainer pod a DNS name before it is ready."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**metadata, "name": ranks_service_name(metadata["name"])},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(selector),
            "ports": [
                {
                    "name": "rendezvous",
                    "port": RENDEZVOUS_PORT,
                    "targetPort": RENDEZVOUS_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }
