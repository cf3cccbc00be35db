"""render_experiment_objects: valid Kubernetes objects whose pods sit where the spec (or the chart) says."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes_validate
import pytest

from lecritique.config.experiment import SpecError, parse_spec
from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.render import EXPERIMENT_LABEL, render_experiment_objects
from tests.helm_support import (
    KUBERNETES_VERSION,
    NAMESPACE,
    RELEASE,
    find,
    gpu_values,
    launcher_defaults,
    one,
    render_objects,
    spec_data,
)

EXPERIMENT = "exp-0123456789"
SERVICES = ["environment-verifier", "policy-trainer", "rollout", "value-trainer", "value-evaluator"]

PLACEMENT = {
    "rollout": {
        "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        "tolerations": [{"key": "pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}],
        "resources": {"requests": {"memory": "40Gi"}, "limits": {"nvidia.com/gpu": "2", "memory": "48Gi"}},
    },
    "value_evaluator": {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100", "h100"]}]}
                    ]
                }
            }
        },
    },
    "policy_trainer": {
        "node_selector": {"pool": "trainer"},
        "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "48"}},
    },
    "environment_verifier": {"replicas": 6, "node_selector": {"pool": "cpu"}},
    "orchestrator": {"tolerations": [{"operator": "Exists"}]},
}


def _spec(**sections: Any) -> Any:
    return parse_spec(spec_data(**sections))


def _workload(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    [obj] = [
        o
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet", "Job")
        and o["metadata"]["name"] == f"{o['metadata']['labels'][EXPERIMENT_LABEL]}-{component}"
    ]
    return obj


def _pod(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return dict(_workload(objects, component)["spec"]["template"]["spec"])


def test_objects_are_valid_against_the_kubernetes_schemas_and_labelled() -> None:
    spec = _spec(placement=PLACEMENT, policy_trainer={"processes": 4})
    for values in ({}, gpu_values()):
        objects = render_experiment_objects(spec, EXPERIMENT, launcher_defaults(values))
        for obj in objects:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            labels = obj["metadata"]["labels"]
            assert labels[EXPERIMENT_LABEL] == EXPERIMENT and labels["app.kubernetes.io/instance"] == RELEASE
            assert obj["metadata"]["namespace"] == NAMESPACE
        kinds = sorted((o["kind"], o["metadata"]["name"].removeprefix(f"{EXPERIMENT}-")) for o in objects)
        assert kinds == sorted(
            [
                ("ConfigMap", "spec"),
                ("Job", "orchestrator"),
                ("Service", "orchestrator"),
                ("Deployment", "environment-verifier"),
                ("Deployment", "rollout"),
                ("Deployment", "value-evaluator"),
                ("StatefulSet", "policy-trainer"),
                ("StatefulSet", "value-trainer"),
                *[("Service", name) for name in SERVICES],
                *[("NetworkPolicy", name) for name in [*SERVICES, "orchestrator"]],
                # A budget for each Deployment of 2+ replicas (six environment verifiers in PLACEMENT, ...).
                *[
                    ("PodDisruptionBudget", o["metadata"]["name"].removeprefix(f"{EXPERIMENT}-"))
                    for o in objects
                    if o["kind"] == "Deployment" and o["spec"]["replicas"] >= 2
                ],
            ]
        )
        assert ("PodDisruptionBudget", "environment-verifier") in kinds
        assert objects[0]["kind"] == "NetworkPolicy", "policies exist before any pod starts"


def test_without_a_critic_there_is_no_value_plane() -> None:
    objects = render_experiment_objects(
        _spec(critic=None, estimator={"name": "rloo"}), EXPERIMENT, launcher_defaults()
    )
    names = {o["metadata"]["name"] for o in objects}
    assert not any("value" in name for name in names)
    command = _pod(objects, "orchestrator")["containers"][0]["command"]
    assert "--value-evaluator" not in command and "--value-trainer" not in command


def test_pods_sit_on_the_node_pools_the_spec_names() -> None:
    objects = render_experiment_objects(
        _spec(placement=PLACEMENT, policy_trainer={"processes": 4}),
        EXPERIMENT,
        launcher_defaults(gpu_values()),
    )
    rollout = _pod(objects, "rollout")
    assert rollout["nodeSelector"] == PLACEMENT["rollout"]["node_selector"]
    assert rollout["tolerations"] == PLACEMENT["rollout"]["tolerations"]
    evaluator = _pod(objects, "value-evaluator")
    assert evaluator["affinity"] == PLACEMENT["value_evaluator"]["affinity"]
    assert _pod(objects, "policy-trainer")["nodeSelector"] == {"pool": "trainer"}
    assert _pod(objects, "environment-verifier")["nodeSelector"] == {"pool": "cpu"}
    assert _pod(objects, "orchestrator")["tolerations"] == [{"operator": "Exists"}]
    # What the spec leaves unset comes from the chart (here: the GPU-pool values).
    values = gpu_values()
    assert evaluator["nodeSelector"] == values["valueEvaluator"]["nodeSelector"]
    assert evaluator["tolerations"] == values["valueEvaluator"]["tolerations"]
    assert _pod(objects, "value-trainer")["nodeSelector"] == values["valueTrainer"]["nodeSelector"]
    assert rollout["affinity"] == values["rollout"]["affinity"]
    assert _pod(objects, "orchestrator")["nodeSelector"] == {"lecritique.dev/pool": "system"}


def test_resources_are_the_chart_defaults_overridden_by_the_spec() -> None:
    objects = render_experiment_objects(
        _spec(placement=PLACEMENT, policy_trainer={"processes": 4}), EXPERIMENT, launcher_defaults()
    )
    chart = launcher_defaults()["components"]
    rollout = _pod(objects, "rollout")["containers"][0]["resources"]
    assert rollout == {
        "requests": {**chart["rollout"]["resources"]["requests"], "memory": "40Gi", "nvidia.com/gpu": "2"},
        "limits": {**chart["rollout"]["resources"]["limits"], "memory": "48Gi", "nvidia.com/gpu": "2"},
    }
    trainer = _pod(objects, "policy-trainer")["containers"][0]["resources"]
    assert trainer["limits"]["nvidia.com/gpu"] == trainer["requests"]["nvidia.com/gpu"] == "4"
    assert (
        trainer["limits"]["cpu"] == "48"
        and trainer["requests"]["cpu"] == chart["policyTrainer"]["resources"]["requests"]["cpu"]
    )
    assert _pod(objects, "value-trainer")["containers"][0]["resources"] == chart["valueTrainer"]["resources"]


def test_policy_trainer_gets_one_gpu_per_process_and_runs_torchrun() -> None:
    objects = render_experiment_objects(
        _spec(policy_trainer={"processes": 2}), EXPERIMENT, launcher_defaults()
    )
    container = _pod(objects, "policy-trainer")["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["command"][:6] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
    ]
    assert container["command"][6:9] == ["lecritique", "serve", "policy-trainer"]
    single = render_experiment_objects(_spec(), EXPERIMENT, launcher_defaults())
    assert _pod(single, "policy-trainer")["containers"][0]["command"][:3] == [
        "lecritique",
        "serve",
        "policy-trainer",
    ]


@pytest.mark.parametrize(
    ("placement", "field"),
    [
        (
            {"rollout": {"resources": {"requests": {"memory": "100Gi"}}}},
            "placement.rollout.resources.requests.memory",
        ),
        (
            {"policy_trainer": {"resources": {"limits": {"nvidia.com/gpu": "3"}}}},
            "placement.policy_trainer.resources.limits.nvidia.com/gpu",
        ),
    ],
)
def test_unschedulable_placements_raise_spec_errors_naming_the_field(
    placement: dict[str, Any], field: str
) -> None:
    with pytest.raises(SpecError) as caught:
        render_experiment_objects(
            _spec(placement=placement, policy_trainer={"processes": 2}), EXPERIMENT, launcher_defaults()
        )
    assert str(caught.value).startswith(field)


def test_replicas_come_from_the_spec_when_set_else_from_the_chart() -> None:
    chart = launcher_defaults(gpu_values())
    defaulted = render_experiment_objects(_spec(), EXPERIMENT, chart)
    assert _workload(defaulted, "rollout")["spec"]["replicas"] == 4
    assert _workload(defaulted, "value-evaluator")["spec"]["replicas"] == 2
    assert _workload(defaulted, "environment-verifier")["spec"]["replicas"] == 4
    explicit = render_experiment_objects(
        _spec(
            rollout={"replicas": 3},
            critic={"kind": "discriminative", "evaluator_replicas": 5},
            placement=PLACEMENT,
            policy_trainer={"processes": 4},
        ),
        EXPERIMENT,
        chart,
    )
    assert _workload(explicit, "rollout")["spec"]["replicas"] == 3
    assert _workload(explicit, "value-evaluator")["spec"]["replicas"] == 5
    assert _workload(explicit, "environment-verifier")["spec"]["replicas"] == 6
    for trainer in ("value-trainer", "policy-trainer"):
        assert _workload(explicit, trainer)["spec"]["replicas"] == 1
    # Every pod reads the same resolved spec, with the replica counts made explicit.
    resolved = json.loads(one(explicit, "ConfigMap", "-spec")["data"]["spec.json"])
    assert resolved["rollout"]["replicas"] == 3 and resolved["critic"]["evaluator_replicas"] == 5
    assert parse_spec(resolved).name == "sudoku-mini"
    resolved_default = json.loads(one(defaulted, "ConfigMap", "-spec")["data"]["spec.json"])
    assert (
        resolved_default["rollout"]["replicas"] == 4 and resolved_default["critic"]["evaluator_replicas"] == 2
    )


def test_every_pod_has_resources_grpc_probes_and_a_non_root_read_only_context() -> None:
    objects = render_experiment_objects(_spec(), EXPERIMENT, launcher_defaults())
    for component in [*SERVICES, "orchestrator"]:
        pod = _pod(objects, component)
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
        [container] = pod["containers"]
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and {"cpu", "memory"} <= set(
            container["resources"]["limits"]
        )
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            expected = (
                {"httpGet": {"path": "/metrics", "port": "metrics"}}
                if component == "orchestrator"
                else {"grpc": {"port": 50051}}
            )
            assert {k: v for k, v in container[probe].items() if k in ("grpc", "httpGet")} == expected, (
                component,
                probe,
            )
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/weights", "/tmp", "/etc/lecritique/spec"} <= mounts
        claim = next(v for v in pod["volumes"] if v["name"] == "weights")["persistentVolumeClaim"][
            "claimName"
        ]
        assert claim == launcher_defaults()["weightsClaim"]


def test_the_orchestrator_reaches_every_service_through_its_headless_service() -> None:
    objects = render_experiment_objects(_spec(), EXPERIMENT, launcher_defaults())
    command = _pod(objects, "orchestrator")["containers"][0]["command"]
    assert command[:2] == ["lecritique", "orchestrate"]
    flags = {command[i]: command[i + 1] for i in range(2, len(command) - 1, 2)}
    services = {o["metadata"]["name"]: o for o in find(objects, "Service")}
    for flag, component in (
        ("--rollout", "rollout"),
        ("--environment", "environment-verifier"),
        ("--policy-trainer", "policy-trainer"),
        ("--value-evaluator", "value-evaluator"),
        ("--value-trainer", "value-trainer"),
    ):
        host, port = flags[flag].rsplit(":", 1)
        service = services[host]
        assert service["spec"]["clusterIP"] == "None"
        assert {
            "name": "grpc",
            "port": int(port),
            "targetPort": "grpc",
            "protocol": "TCP",
            "appProtocol": "grpc",
        } in service["spec"]["ports"]
        pod_labels = _workload(objects, component)["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()
    assert flags["--experiment"] == EXPERIMENT and flags["--metrics-port"] == "9090"
    for component in SERVICES:
        statefulset = _workload(objects, component)
        if statefulset["kind"] == "StatefulSet":
            assert statefulset["spec"]["serviceName"] == f"{EXPERIMENT}-{component}"


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_chart_service_monitors_and_network_policies_select_the_experiment_objects() -> None:
    chart_objects = render_objects()
    objects = render_experiment_objects(_spec(), EXPERIMENT, launcher_defaults())
    for component in [*SERVICES, "orchestrator"]:
        service = one(objects, "Service", f"-{component}")
        monitor = one(chart_objects, "ServiceMonitor", f"-{component}")
        assert _matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
        assert "metrics" in {p["name"] for p in service["spec"]["ports"]}
        pod_labels = _workload(objects, component)["spec"]["template"]["metadata"]["labels"]
        policy = one(chart_objects, "NetworkPolicy", f"-{component}")
        assert _matches(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
        assert _matches(
            one(objects, "NetworkPolicy", f"-{component}")["spec"]["podSelector"]["matchLabels"], pod_labels
        )
    redis_policy = one(chart_objects, "NetworkPolicy", "-redis")
    peer = redis_policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    assert all(
        _matches(peer, _workload(objects, c)["spec"]["template"]["metadata"]["labels"])
        for c in [*SERVICES, "orchestrator"]
    )


def test_grpc_flows_only_from_the_experiments_own_orchestrator_to_its_own_services() -> None:
    """Per-experiment NetworkPolicies: another experiment's pods can neither call these services
    nor be called by this orchestrator; only the value evaluator gets the tenant's LLM egress."""
    llm_egress = [
        {"to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}], "ports": [{"port": 443, "protocol": "TCP"}]}
    ]
    objects = render_experiment_objects(_spec(), EXPERIMENT, launcher_defaults(), llm_egress=llm_egress)
    other = render_experiment_objects(_spec(), "exp-ffffffffff", launcher_defaults())
    orchestrator = _workload(objects, "orchestrator")["spec"]["template"]["metadata"]["labels"]
    foreign_orchestrator = _workload(other, "orchestrator")["spec"]["template"]["metadata"]["labels"]
    for component in SERVICES:
        policy = one(objects, "NetworkPolicy", f"-{component}")
        [rule] = policy["spec"]["ingress"]
        assert rule["ports"] == [{"port": 50051, "protocol": "TCP"}]
        [peer] = rule["from"]
        assert _matches(peer["podSelector"]["matchLabels"], orchestrator)
        assert not _matches(peer["podSelector"]["matchLabels"], foreign_orchestrator)
        assert policy["spec"].get("egress", []) == (llm_egress if component == "value-evaluator" else [])
    [egress] = one(objects, "NetworkPolicy", "-orchestrator")["spec"]["egress"]
    assert egress["ports"] == [{"port": 50051, "protocol": "TCP"}]
    targets = egress["to"][0]["podSelector"]["matchLabels"]
    assert all(
        _matches(targets, _workload(objects, c)["spec"]["template"]["metadata"]["labels"]) for c in SERVICES
    )
    assert not any(
        _matches(targets, _workload(other, c)["spec"]["template"]["metadata"]["labels"]) for c in SERVICES
    )


def test_disruption_budgets_only_for_deployments_of_two_or_more_replicas() -> None:
    """A budget on one pod protects nothing; trainers (StatefulSets) and the orchestrator are drainable."""
    single = render_experiment_objects(
        _spec(placement={"environment_verifier": {"replicas": 1}}), EXPERIMENT, launcher_defaults()
    )
    assert find(single, "PodDisruptionBudget") == []
    spread = render_experiment_objects(
        _spec(
            rollout={"replicas": 3},
            critic={"kind": "discriminative", "context": "reference", "evaluator_replicas": 2},
        ),
        EXPERIMENT,
        launcher_defaults(),
    )
    budgets = {
        o["metadata"]["name"].removeprefix(f"{EXPERIMENT}-"): o for o in find(spread, "PodDisruptionBudget")
    }
    assert set(budgets) == {
        "rollout",
        "value-evaluator",
        "environment-verifier",
    }  # the chart runs 2 verifiers
    for component, budget in budgets.items():
        assert budget["spec"]["maxUnavailable"] == 1
        assert _matches(
            budget["spec"]["selector"]["matchLabels"],
            _workload(spread, component)["spec"]["template"]["metadata"]["labels"],
        )
        assert budget["spec"]["selector"]["matchLabels"][EXPERIMENT_LABEL] == EXPERIMENT


def test_experiment_pods_reach_redis_as_the_experiments_user_with_the_password_from_the_secret() -> None:
    """Every pod but the environment verifier's, which uses no Redis (tests/integration/launch/test_verifier_credentials.py)."""
    objects = render_experiment_objects(_spec(), EXPERIMENT, launcher_defaults())
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        if obj["metadata"]["labels"]["app.kubernetes.io/component"] == "environment-verifier":
            continue
        env = obj["spec"]["template"]["spec"]["containers"][0]["env"]
        names = [item["name"] for item in env]
        password = env[names.index("LECRITIQUE_REDIS_PASSWORD")]
        assert password["valueFrom"] == {
            "secretKeyRef": {"name": f"{RELEASE}-lecritique-redis-auth", "key": "experiments-password"}
        }
        url = env[names.index("REDIS_URL")]["value"]
        assert url == f"redis://experiments:$(LECRITIQUE_REDIS_PASSWORD)@{RELEASE}-lecritique-redis:6379/0"
        assert names.index("LECRITIQUE_REDIS_PASSWORD") < names.index("REDIS_URL"), (
            "Kubernetes expands only variables defined earlier"
        )


def test_a_spec_variable_never_replaces_a_built_in_one() -> None:
    """Even if a reserved name got past the API's policy, REDIS_URL stays the platform's."""
    llm = {
        "kind": "openai",
        "base_url": "https://api.example.com/v1",
        "model": "judge",
        "api_key_env": "REDIS_URL",
        "api_key_secret": "judge-credentials",
    }
    objects = render_experiment_objects(
        _spec(critic={"kind": "frozen_llm", "llm": llm}, estimator={"name": "lvrl"}),
        EXPERIMENT,
        launcher_defaults(),
    )
    env = _pod(objects, "value-evaluator")["containers"][0]["env"]
    [redis_url] = [item for item in env if item["name"] == "REDIS_URL"]
    assert "value" in redis_url and "experiments:" in redis_url["value"]


def test_rendering_is_pure() -> None:
    spec = _spec(placement=PLACEMENT, policy_trainer={"processes": 4})
    defaults = launcher_defaults()
    before = copy.deepcopy(defaults)
    first = render_experiment_objects(spec, EXPERIMENT, defaults)
    second = render_experiment_objects(spec, EXPERIMENT, ChartDefaults.model_validate(defaults))
    assert first == second and defaults == before
    first[0]["metadata"]["labels"]["x"] = "y"
    assert "x" not in render_experiment_objects(spec, EXPERIMENT, defaults)[0]["metadata"]["labels"]


@pytest.mark.parametrize("bad_id", ["Exp-1", "exp_1", "-exp", "exp-" + "a" * 30, ""])
def test_experiment_ids_must_be_short_dns_labels(bad_id: str) -> None:
    with pytest.raises(ValueError, match="experiment id"):
        render_experiment_objects(_spec(), bad_id, launcher_defaults())


def test_chart_defaults_with_unknown_keys_are_refused() -> None:
    defaults = launcher_defaults()
    defaults["components"]["rollout"]["gpus"] = 2
    with pytest.raises(ValueError, match="gpus"):
        render_experiment_objects(_spec(), EXPERIMENT, defaults)


def test_a_frozen_llm_api_key_comes_from_the_named_secret_in_the_value_evaluator_only() -> None:
    llm = {
        "kind": "openai",
        "base_url": "https://api.example.com/v1",
        "model": "judge",
        "api_key_env": "JUDGE_KEY",
        "api_key_secret": "judge-credentials",
        "api_key_secret_key": "token",
    }
    spec = _spec(critic={"kind": "frozen_llm", "llm": llm}, estimator={"name": "lvrl"})
    objects = render_experiment_objects(spec, EXPERIMENT, launcher_defaults())
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    [container] = _pod(objects, "value-evaluator")["containers"]
    [key] = [item for item in container["env"] if item["name"] == "JUDGE_KEY"]
    assert key == {
        "name": "JUDGE_KEY",
        "valueFrom": {"secretKeyRef": {"name": "judge-credentials", "key": "token"}},
    }
    # The launcher references the Secret, never creates or reads it; no other pod gets the key.
    assert all(o["kind"] != "Secret" for o in objects)
    others = [
        o
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet", "Job")
        and not o["metadata"]["name"].endswith("value-evaluator")
    ]
    assert others and all(
        "JUDGE_KEY"
        not in {
            item["name"] for c in o["spec"]["template"]["spec"]["containers"] for item in c.get("env", [])
        }
        for o in others
    )


def test_a_secret_without_a_variable_to_mount_it_as_is_a_spec_error() -> None:
    llm = {
        "kind": "openai",
        "base_url": "https://api.example.com/v1",
        "model": "judge",
        "api_key_env": None,
        "api_key_secret": "judge",
    }
    with pytest.raises(SpecError, match="api_key_secret"):
        _spec(critic={"kind": "frozen_llm", "llm": llm}, estimator={"name": "lvrl"})
