"""A policy trainer with more processes than one node's GPUs: torchrun across its StatefulSet's pods.

Rendered with Helm's own engine (the chart's launcher defaults and NetworkPolicy) and the
launcher, every object checked against the Kubernetes schemas.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from lecritique.config.experiment import SpecError, parse_spec
from lecritique.launch.kubernetes.multinode import POD_INDEX_LABEL, POD_NAME_LABEL, RENDEZVOUS_PORT
from lecritique.launch.kubernetes.render import render_experiment_objects
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
    assert (
        container["resources"]["limits"]["nvidia.com/gpu"]
        == container["resources"]["requests"]["nvidia.com/gpu"]
        == "8"
    )
    command = container["command"]
    master = f"{TRAINER}-0.{TRAINER}-ranks.{NAMESPACE}.svc"
    assert command[:9] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=8",
        "--node_rank=$(NODE_RANK)",
        f"--master_addr={master}",
        f"--master_port={RENDEZVOUS_PORT}",
        "-m",
    ]
    assert command[9:12] == ["lecritique", "serve", "policy-trainer"]
    [node_rank] = [item for item in container["env"] if item["name"] == "NODE_RANK"]
    assert node_rank["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{POD_INDEX_LABEL}']"

    # The governing Service gives pod 0 its DNS name before any pod is ready.
    ranks = one(objects, "Service", "-policy-trainer-ranks")
    assert statefulset["spec"]["serviceName"] == ranks["metadata"]["name"] == f"{TRAINER}-ranks"
    assert ranks["spec"]["clusterIP"] == "None" and ranks["spec"]["publishNotReadyAddresses"] is True
    assert ranks["spec"]["ports"] == [
        {"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT, "protocol": "TCP"}
    ]
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
    assert container["command"][:5] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=4",
    ]
    assert not [o for o in single if o["metadata"]["name"].endswith("-ranks")]
    assert POD_NAME_LABEL not in one(single, "Service", "-policy-trainer")["spec"]["selector"]


def test_processes_that_do_not_fill_whole_pods_are_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"^policy_trainer.processes: 12 processes do not fill pods of 8"):
        _render(processes=12)


def test_the_schema_refuses_a_node_without_gpus() -> None:
    from helm_python import HelmValuesError

    with pytest.raises(HelmValuesError, match="gpusPerNode"):
        render_templates({"policyTrainer": {"gpusPerNode": 0}})


def _collective(objects: list[dict[str, Any]], component: str) -> tuple[set[str], set[str]]:
    """Components reached on any port, in and out, by one component's experiment policy (label of each peer)."""
    [policy] = [
        o
        for o in objects
        if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == f"{EXPERIMENT}-{component}"
    ]
    spec = policy["spec"]
    sides = []
    for rules, key in ((spec.get("ingress", []), "from"), (spec.get("egress", []), "to")):
        peers = [peer for rule in rules if "ports" not in rule for peer in rule[key]]
        for peer in peers:
            assert (
                peer["podSelector"]["matchLabels"]["lecritique.dev/experiment"] == EXPERIMENT
            )  # never another experiment's pods
        sides.append({peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for peer in peers})
    return sides[0], sides[1]


def test_the_chart_baseline_opens_no_port_between_experiment_pods() -> None:
    """torch.distributed groups are opened per experiment by the launcher, not by the chart for every experiment."""
    for component in ("policy-trainer", "rollout", "value-trainer", "value-evaluator"):
        policy = one(render_objects(), "NetworkPolicy", f"-{component}")
        assert all("ports" in rule for rule in policy["spec"]["ingress"]), component


def test_a_multi_pod_trainer_reaches_its_own_pods_on_any_port_and_nothing_else_does() -> None:
    objects = _render(processes=16)
    statefulset = _trainer(objects)
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert _collective(objects, "policy-trainer") == ({"policy-trainer"}, {"policy-trainer"})
    [policy] = [o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == TRAINER]
    [rule] = [r for r in policy["spec"]["ingress"] if "ports" not in r]
    assert rule["from"][0]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    for component in ("rollout", "value-trainer", "value-evaluator", "environment-verifier", "orchestrator"):
        assert _collective(objects, component) == (set(), set()), component
    single = _render(processes=8)  # one pod: its ranks talk over loopback
    assert _collective(single, "policy-trainer") == (set(), set())


def test_broadcast_groups_open_between_each_trainer_and_its_replicas_both_ways() -> None:
    broadcast = {"kind": "broadcast"}
    data = spec_data(policy_trainer={"weight_transport": broadcast}, rollout={"replicas": 2})
    data["critic"] = {**data["critic"], "weight_transport": broadcast}
    objects = render_experiment_objects(parse_spec(data), EXPERIMENT, launcher_defaults())
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    # Replicas connect to each other too: gloo and NCCL connect every pair of ranks of a group.
    policy_group = {"policy-trainer", "rollout"}
    value_group = {"value-trainer", "value-evaluator"}
    assert _collective(objects, "policy-trainer") == (policy_group, policy_group)
    assert _collective(objects, "rollout") == (policy_group, policy_group)
    assert _collective(objects, "value-trainer") == (value_group, value_group)
    assert _collective(objects, "value-evaluator") == (value_group, value_group)
    for component in ("environment-verifier", "orchestrator"):
        assert _collective(objects, component) == (set(), set()), component


VALUE_TRAINER = f"{EXPERIMENT}-value-trainer"


def _render_critic(values: dict[str, Any] | None = None, **critic: Any) -> list[dict[str, Any]]:
    spec = parse_spec(spec_data(critic={"kind": "discriminative", "context": "reference", **critic}))
    objects = render_experiment_objects(spec, EXPERIMENT, launcher_defaults(values))
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    return objects


def _value_trainer(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    [statefulset] = [
        o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == VALUE_TRAINER
    ]
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    return statefulset, container


def test_a_critic_in_sixteen_processes_trains_on_two_value_trainer_pods_that_meet_at_pod_zero() -> None:
    objects = _render_critic(processes=16, parallelism="fsdp2")  # the chart's valueTrainer.gpusPerNode: 8
    statefulset, container = _value_trainer(objects)
    assert statefulset["spec"]["replicas"] == 2 and statefulset["spec"]["podManagementPolicy"] == "Parallel"
    assert (
        container["resources"]["limits"]["nvidia.com/gpu"]
        == container["resources"]["requests"]["nvidia.com/gpu"]
        == "8"
    )
    master = f"{VALUE_TRAINER}-0.{VALUE_TRAINER}-ranks.{NAMESPACE}.svc"
    assert container["command"][:12] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=8",
        "--node_rank=$(NODE_RANK)",
        f"--master_addr={master}",
        f"--master_port={RENDEZVOUS_PORT}",
        "-m",
        "lecritique",
        "serve",
        "value-trainer",
    ]
    assert [item["name"] for item in container["env"]].count("NODE_RANK") == 1
    ranks = one(objects, "Service", "-value-trainer-ranks")
    assert statefulset["spec"]["serviceName"] == ranks["metadata"]["name"]
    assert ranks["spec"]["publishNotReadyAddresses"] is True
    assert (
        one(objects, "Service", "-value-trainer")["spec"]["selector"][POD_NAME_LABEL] == f"{VALUE_TRAINER}-0"
    )
    # Its pods reach each other on any port; the policy trainer (one process here) opens nothing.
    assert _collective(objects, "value-trainer") == ({"value-trainer"}, {"value-trainer"})
    assert _collective(objects, "policy-trainer") == (set(), set())
    assert not [o for o in objects if o["metadata"]["name"] == f"{TRAINER}-ranks"]


def test_a_critic_in_two_processes_runs_standalone_torchrun_on_one_pod() -> None:
    objects = _render_critic(processes=2)
    statefulset, container = _value_trainer(objects)
    assert statefulset["spec"]["replicas"] == 1
    assert container["command"][:7] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "lecritique",
    ]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "NODE_RANK" not in [item["name"] for item in container.get("env", [])]
    # One process: the plain service, as before.
    _, plain = _value_trainer(_render_critic())
    assert plain["command"][:3] == ["lecritique", "serve", "value-trainer"]


def test_the_critics_processes_per_node_and_the_chart_value_set_the_pods() -> None:
    statefulset, container = _value_trainer(_render_critic(processes=4, processes_per_node=2))
    assert statefulset["spec"]["replicas"] == 2 and "--nproc_per_node=2" in container["command"]
    values = {"valueTrainer": {"gpusPerNode": 4}}
    assert launcher_defaults(values)["components"]["valueTrainer"]["gpusPerNode"] == 4
    assert _value_trainer(_render_critic(values, processes=8))[0]["spec"]["replicas"] == 2
    with pytest.raises(
        SpecError,
        match=r"^critic.processes: 12 processes do not fill pods of 8 \(critic.processes_per_node, else the chart's valueTrainer.gpusPerNode\)",
    ):
        _render_critic(processes=12)


def test_only_a_discriminative_critic_trains_in_several_processes() -> None:
    data = spec_data(critic={"kind": "generative", "processes": 2})
    with pytest.raises(SpecError, match=r"critic\.processes: unknown field"):
        parse_spec(data)
