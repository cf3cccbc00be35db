"""A policy trainer with more processes than one node's GPUs: torchrun across its StatefulSet's pods.

Rendered with Helm's own engine (the chart's launcher defaults and NetworkPolicy) and the
launcher, every object checked against the Kubernetes schemas.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from lecritique.config.experiment import SpecError, parse_spec
from lecritique.launch.kubernetes import render_experiment_objects
from lecritique.launch.multinode import POD_INDEX_LABEL, POD_NAME_LABEL, RENDEZVOUS_PORT
from tests.helm_support import (
    KUBERNETES_VERSION,
    NAMESPACE,
    launcher_defaults,
    one,
    render_objects,
    render_templates,
    spec_data,
)

EXPERIMENT = "exp-multi"
TRAINER = f"{EXPERIMENT}-policy-trainer"


def _render(values: dict[str, Any] | None = None, **trainer: Any) -> list[dict[str, Any]]:
    spec = parse_spec(spec_data(policy_trainer=trainer))
    objects = render_experiment_objects(spec, EXPERIMENT, launcher_defaults(values))
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    return objects


def _trainer(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [statefulset] = [o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == TRAINER]
    return statefulset


def test_sixteen_processes_on_eight_gpu_nodes_run_on_two_pods_that_meet_at_pod_zero() -> None:
    objects = _render(processes=16, parallelism="fsdp2")  # the chart's policyTrainer.gpusPerNode: 8
    statefulset = _trainer(objects)
    assert statefulset["spec"]["replicas"] == 2
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"  # both pods start at once to meet
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == container["resources"]["requests"]["nvidia.com/gpu"] == "8"
    command = container["command"]
    master = f"{TRAINER}-0.{TRAINER}-ranks.{NAMESPACE}.svc"
    assert command[:9] == [
        "python", "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=8", "--node_rank=$(NODE_RANK)",
        f"--master_addr={master}", f"--master_port={RENDEZVOUS_PORT}", "-m",
    ]
    assert command[9:12] == ["lecritique", "serve", "policy-trainer"]
    [node_rank] = [item for item in container["env"] if item["name"] == "NODE_RANK"]
    assert node_rank["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{POD_INDEX_LABEL}']"

    # The governing Service gives pod 0 its DNS name before any pod is ready.
    ranks = one(objects, "Service", "-policy-trainer-ranks")
    assert statefulset["spec"]["serviceName"] == ranks["metadata"]["name"] == f"{TRAINER}-ranks"
    assert ranks["spec"]["clusterIP"] == "None" and ranks["spec"]["publishNotReadyAddresses"] is True
    assert ranks["spec"]["ports"] == [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT, "protocol": "TCP"}]
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert ranks["spec"]["selector"].items() <= pod_labels.items()
    # The orchestrator's gRPC Service reaches global rank 0 only: pod 0.
    grpc_service = one(objects, "Service", "-policy-trainer")
    assert grpc_service["spec"]["selector"] == {**ranks["spec"]["selector"], POD_NAME_LABEL: f"{TRAINER}-0"}


def test_processes_per_node_in_the_spec_wins_over_the_chart() -> None:
    statefulset = _trainer(_render(processes=4, processes_per_node=2))
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    assert statefulset["spec"]["replicas"] == 2
    assert "--nnodes=2" in container["command"] and "--nproc_per_node=2" in container["command"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_the_chart_value_sets_the_node_size_and_one_node_stays_standalone() -> None:
    values = {"policyTrainer": {"gpusPerNode": 4}}
    assert launcher_defaults(values)["components"]["policyTrainer"]["gpusPerNode"] == 4
    assert _trainer(_render(values, processes=8))["spec"]["replicas"] == 2
    single = _render(values, processes=4)
    statefulset = _trainer(single)
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    assert statefulset["spec"]["replicas"] == 1 and statefulset["spec"]["serviceName"] == TRAINER
    assert container["command"][:5] == ["python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert not [o for o in single if o["metadata"]["name"].endswith("-ranks")]
    assert POD_NAME_LABEL not in one(single, "Service", "-policy-trainer")["spec"]["selector"]


def test_processes_that_do_not_fill_whole_pods_are_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"^policy_trainer.processes: 12 processes do not fill pods of 8"):
        _render(processes=12)


def test_the_schema_refuses_a_node_without_gpus() -> None:
    from helm_python import HelmValuesError

    with pytest.raises(HelmValuesError, match="gpusPerNode"):
        render_templates({"policyTrainer": {"gpusPerNode": 0}})


def test_trainer_pods_reach_each_other_on_any_port_and_only_the_broadcast_peers_do_too() -> None:
    policy = one(render_objects(), "NetworkPolicy", "-policy-trainer")
    statefulset = _trainer(_render(processes=16))
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    open_peers = [peer for rule in policy["spec"]["ingress"] if "ports" not in rule for peer in rule["from"]]
    [peer] = [p for p in open_peers if p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "policy-trainer"]
    assert peer["podSelector"]["matchLabels"].items() <= pod_labels.items()
    # Besides its own ranks, only the rollout replicas it broadcasts weights to.
    assert {p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in open_peers} == {"policy-trainer", "rollout"}
    environment = one(render_objects(), "NetworkPolicy", "-environment-verifier")
    assert all("ports" in rule for rule in environment["spec"]["ingress"])
