"""The Helm chart rendered by Helm's own engine: lint, Kubernetes schemas, and the chart's rules."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
from helm_python import lint

from lecritique.launch.kubernetes.launcher import REQUIRED_RULES
from tests.helm_support import (
    CHART,
    KUBERNETES_VERSION,
    NAMESPACE,
    RELEASE,
    find,
    gpu_values,
    launcher_defaults,
    one,
    pod_specs,
    render_objects,
    render_templates,
    with_operator_token,
)

VALUE_SETS = {"default": with_operator_token({}), "gpu-pools": with_operator_token(gpu_values())}
"""The shipped values files, each with a token hash of the operator's own (without, the chart refuses: tests/unit/chart/test_chart_tokens.py)."""
COMPONENT_VALUE_KEYS = [
    "orchestrator",
    "rollout",
    "environmentVerifier",
    "valueEvaluator",
    "valueTrainer",
    "policyTrainer",
]
COMPONENT_LABELS = [
    "orchestrator",
    "rollout",
    "environment-verifier",
    "value-evaluator",
    "value-trainer",
    "policy-trainer",
]
GRPC_COMPONENTS = [c for c in COMPONENT_LABELS if c != "orchestrator"]
CLUSTER_SCOPED = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.mark.parametrize("values_name", list(VALUE_SETS))
def test_helm_lint_is_clean(values_name: str) -> None:
    report = lint(str(CHART), VALUE_SETS[values_name], strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    # Severity 2 = warning, 3 = error; the only info Helm gives is "icon is recommended".
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values_name", list(VALUE_SETS))
def test_every_object_is_valid_against_the_kubernetes_schemas(values_name: str) -> None:
    objects = render_objects(VALUE_SETS[values_name])
    kinds = {o["kind"] for o in objects}
    assert {
        "Deployment",
        "StatefulSet",
        "Service",
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    } <= kinds
    for obj in objects:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            # Custom resources: kubernetes-validate has no schema; their shape is checked below
            # (ServiceMonitors) and by promtool (the PrometheusRule, tests/integration/chart/test_alerts.py).
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        if obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_kubernetes_validate_rejects_what_it_should() -> None:
    """The schema check is real: an unknown field and a wrong type both fail."""
    deployment = one(render_objects(), "Deployment", "-api")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def _check_pod(name: str, pod: dict[str, Any]) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True, name
    assert pod["securityContext"]["runAsUser"] > 0, name
    for container in pod["containers"]:
        where = f"{name}/{container['name']}"
        for side in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][side]), f"{where}: {side}"
        assert "livenessProbe" in container and "readinessProbe" in container, where
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True and context["allowPrivilegeEscalation"] is False, where
        assert context["readOnlyRootFilesystem"] is True, where
        assert context["capabilities"]["drop"] == ["ALL"], where


@pytest.mark.parametrize("values_name", list(VALUE_SETS))
def test_every_chart_pod_has_resources_probes_and_a_non_root_read_only_context(values_name: str) -> None:
    pods = [
        (o["metadata"]["name"], pod) for o in render_objects(VALUE_SETS[values_name]) for pod in pod_specs(o)
    ]
    assert {name.removeprefix(f"{RELEASE}-lecritique-") for name, _ in pods} == {"api", "redis"}
    for name, pod in pods:
        _check_pod(name, pod)


def test_redis_persists_to_an_append_only_file_on_a_volume_claim() -> None:
    objects = render_objects()
    redis = one(objects, "StatefulSet", "-redis")
    config = one(objects, "ConfigMap", "-redis")["data"]["redis.conf"].splitlines()
    assert "appendonly yes" in config and "appendfsync everysec" in config and 'save ""' in config
    assert "dir /data" in config
    [claim] = redis["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data" and claim["spec"]["resources"]["requests"]["storage"] == "8Gi"
    mounts = {
        m["name"]: m["mountPath"] for m in redis["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    }
    assert mounts["data"] == "/data"
    gpu = render_objects(gpu_values())
    assert "appendfsync always" in one(gpu, "ConfigMap", "-redis")["data"]["redis.conf"].splitlines()


def test_the_weight_volume_is_read_write_many_and_survives_uninstall() -> None:
    claim = one(render_objects(), "PersistentVolumeClaim", "-weights")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert launcher_defaults()["weightsClaim"] == claim["metadata"]["name"]
    assert find(render_objects({"weights": {"existingClaim": "shared-rwx"}}), "PersistentVolumeClaim") == []
    assert launcher_defaults({"weights": {"existingClaim": "shared-rwx"}})["weightsClaim"] == "shared-rwx"


def _normalise(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_api_role_grants_exactly_what_the_kubernetes_launcher_calls() -> None:
    objects = render_objects()
    role = one(objects, "Role", "-api-launcher")
    assert _normalise(role["rules"]) == _normalise(REQUIRED_RULES)
    assert "deletecollection" not in {verb for _, _, verb in _normalise(role["rules"])}
    assert not find(objects, "ClusterRole") and not find(objects, "ClusterRoleBinding")
    binding = one(objects, "RoleBinding", "-api-launcher")
    api_account = one(objects, "ServiceAccount", "-api")["metadata"]["name"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": api_account, "namespace": NAMESPACE}]
    assert one(objects, "Deployment", "-api")["spec"]["template"]["spec"]["serviceAccountName"] == api_account
    # Experiment pods get an account without API access.
    workload_account = one(objects, "ServiceAccount", "-workload")
    assert workload_account["automountServiceAccountToken"] is False
    assert launcher_defaults()["serviceAccountName"] == workload_account["metadata"]["name"]


def _ingress_ports(policy: dict[str, Any]) -> dict[int, list[Any] | None]:
    """Port -> its allowed peers (None: from anywhere); rules without ports are left out."""
    out: dict[int, list[Any] | None] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule.get("ports", []):
            out[port["port"]] = rule.get("from")
    return out


def _egress(policy: dict[str, Any]) -> list[tuple[tuple[int, ...], list[Any] | None]]:
    """(ports, peers) of every egress rule (peers None: any destination)."""
    return [
        (tuple(p["port"] for p in rule.get("ports", [])), rule.get("to"))
        for rule in policy["spec"].get("egress", [])
    ]


RELEASE_PODS = [
    {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/part-of": "lecritique"}
        }
    }
]
DNS = [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
REDIS_PODS = [
    {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": "redis"}
        }
    }
]
BASE_EGRESS = [((53, 53), DNS), ((6379,), REDIS_PODS)]


def test_every_pod_has_ingress_and_egress_policies_that_allow_only_dns_redis_and_metrics() -> None:
    """The chart's baseline: experiment pods get no gRPC and no egress beyond DNS and Redis (the
    launcher adds gRPC within one experiment); Redis opens no connection; the API reaches DNS,
    Redis and the Kubernetes API server only."""
    objects = render_objects()
    for component in COMPONENT_LABELS:
        policy = one(objects, "NetworkPolicy", f"-{component}")
        assert policy["spec"]["podSelector"]["matchLabels"] == {
            "app.kubernetes.io/instance": RELEASE,
            "app.kubernetes.io/component": component,
        }
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert _ingress_ports(policy) == {9090: None}, component
        # The environment verifier scores what a policy writes and uses no Redis (issue 37): DNS only.
        expected = BASE_EGRESS[:1] if component == "environment-verifier" else BASE_EGRESS
        assert _egress(policy) == expected, component
    redis = one(objects, "NetworkPolicy", "-redis")
    not_the_verifier = [
        {"key": "app.kubernetes.io/component", "operator": "NotIn", "values": ["environment-verifier"]}
    ]
    assert _ingress_ports(redis) == {
        6379: [{"podSelector": {**RELEASE_PODS[0]["podSelector"], "matchExpressions": not_the_verifier}}]
    }
    assert redis["spec"]["policyTypes"] == ["Ingress", "Egress"] and redis["spec"]["egress"] == []
    api = one(objects, "NetworkPolicy", "-api")
    assert _ingress_ports(api) == {8000: None}
    assert _egress(api) == [*BASE_EGRESS, ((443, 6443), None)]
    apiserver = [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    pinned = render_objects({"networkPolicy": {"kubernetesApi": {"to": apiserver, "ports": [443]}}})
    assert _egress(one(pinned, "NetworkPolicy", "-api"))[-1] == ((443,), apiserver)
    assert (
        _egress(one(render_objects({"api": {"launcher": "local"}}), "NetworkPolicy", "-api")) == BASE_EGRESS
    )
    scrapers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    restricted = render_objects({"networkPolicy": {"metricsFrom": scrapers}})
    assert _ingress_ports(one(restricted, "NetworkPolicy", "-rollout"))[9090] == scrapers
    assert find(render_objects({"networkPolicy": {"enabled": False}}), "NetworkPolicy") == []


def test_pod_disruption_budgets_only_where_they_protect_something() -> None:
    """One API pod and one Redis pod: no budget (maxUnavailable 1 on one pod protects nothing, 0
    blocks every drain). Experiment budgets are the launcher's (tests/unit/api/test_kubernetes_rendering.py)."""
    assert find(render_objects(), "PodDisruptionBudget") == []
    [budget] = find(render_objects({"api": {"replicas": 3}}), "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "api"
    assert (
        find(render_objects({"api": {"replicas": 3, "pdb": {"enabled": False}}}), "PodDisruptionBudget") == []
    )


def test_service_monitors_scrape_every_component() -> None:
    monitors = {
        o["metadata"]["labels"]["app.kubernetes.io/component"]: o
        for o in find(render_objects(), "ServiceMonitor")
    }
    assert set(monitors) == {"api", *COMPONENT_LABELS}
    for component, monitor in monitors.items():
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/instance": RELEASE,
            "app.kubernetes.io/component": component,
        }
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        [endpoint] = monitor["spec"]["endpoints"]
        assert (
            endpoint["port"] == ("http" if component == "api" else "metrics")
            and endpoint["path"] == "/metrics"
        )
    api_service = one(render_objects(), "Service", "-api")
    assert {p["name"] for p in api_service["spec"]["ports"]} == {"http"}
    assert {
        k: api_service["metadata"]["labels"][k] for k in monitors["api"]["spec"]["selector"]["matchLabels"]
    } == monitors["api"]["spec"]["selector"]["matchLabels"]
    labelled = find(render_objects(gpu_values()), "ServiceMonitor")
    assert all(m["metadata"]["labels"]["release"] == "kube-prometheus-stack" for m in labelled)
    assert find(render_objects({"serviceMonitor": {"enabled": False}}), "ServiceMonitor") == []


def test_dashboards_ship_as_configmaps_labelled_for_grafana() -> None:
    maps = [
        o
        for o in find(render_objects(), "ConfigMap")
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == "dashboards"
    ]
    assert {m["metadata"]["name"] for m in maps} == {
        f"{RELEASE}-lecritique-dashboard-lecritique-{name}"
        for name in ("critic", "training", "replay", "services")
    }
    for config_map in maps:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        [(key, text)] = config_map["data"].items()
        dashboard = json.loads(text)
        assert key == f"{dashboard['uid']}.json" and dashboard["panels"]
    moved = find(render_objects({"dashboards": {"namespace": "grafana"}}), "ConfigMap")
    assert {m["metadata"]["namespace"] for m in moved if "dashboard" in m["metadata"]["name"]} == {"grafana"}


def test_launcher_defaults_carry_each_values_block() -> None:
    defaults = launcher_defaults()
    assert defaults["release"] == RELEASE and defaults["namespace"] == NAMESPACE
    assert defaults["redisUrl"] == f"redis://{RELEASE}-lecritique-redis:6379/0"
    assert defaults["redisAuth"] == {
        "secretName": f"{RELEASE}-lecritique-redis-auth",
        "passwordKey": "experiments-password",
        "username": "experiments",
    }
    assert set(defaults["components"]) == set(COMPONENT_VALUE_KEYS)
    for key in ("rollout", "valueEvaluator", "valueTrainer", "policyTrainer"):
        block = defaults["components"][key]
        assert block["resources"]["limits"]["nvidia.com/gpu"] == "1", key
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in block[
            "tolerations"
        ], key
    assert "nvidia.com/gpu" not in defaults["components"]["environmentVerifier"]["resources"]["limits"]
    assert defaults["components"]["rollout"]["image"] == "ghcr.io/lecritique/services:0.1.0"
    pinned = launcher_defaults({"rollout": {"image": {"digest": "sha256:" + "ab" * 32}}})
    assert pinned["components"]["rollout"]["image"] == "ghcr.io/lecritique/services@sha256:" + "ab" * 32


def test_gpu_pool_values_put_each_component_on_its_pool() -> None:
    values = gpu_values()
    defaults = launcher_defaults(values)
    for key in COMPONENT_VALUE_KEYS:
        block = defaults["components"][key]
        assert block["nodeSelector"] == values[key]["nodeSelector"], key
        assert block["tolerations"] == values[key].get("tolerations", []), key
    assert defaults["components"]["rollout"]["affinity"] == values["rollout"]["affinity"]
    assert defaults["components"]["rollout"]["replicas"] == 4
    assert defaults["components"]["rollout"]["env"] == values["rollout"]["env"]
    objects = render_objects(values)
    for suffix, kind in (("-api", "Deployment"), ("-redis", "StatefulSet")):
        pod = one(objects, kind, suffix)["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"lecritique.dev/pool": "system"}


def test_token_hashes_go_into_a_secret_and_plain_tokens_are_refused() -> None:
    digest = "sha256:" + "0f" * 32
    secret = one(render_objects({"api": {"auth": {"tokens": {"alice": digest}}}}), "Secret", "-api-tokens")
    import base64

    assert json.loads(base64.b64decode(secret["data"]["tokens.json"])) == {"alice": digest}
    objects = render_objects({"api": {"auth": {"existingSecret": "my-tokens"}}})
    assert find(objects, "Secret", "-api-tokens") == []
    volumes = one(objects, "Deployment", "-api")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tokens", "secret": {"secretName": "my-tokens"}} in volumes


@pytest.mark.parametrize("component", ["rollout", "api", "redis", "valueTrainer"])
def test_a_latest_image_tag_is_refused_naming_the_field_and_why(component: str) -> None:
    """Not the schema's "'not' failed" (issue 30): the field, what is wrong and what to do."""
    from helm_python import HelmRenderError

    with pytest.raises(HelmRenderError) as caught:
        render_templates({component: {"image": {"tag": "latest"}}})
    message = str(caught.value)
    assert f"{component}.image.tag: 'latest' is refused" in message and "pin a version" in message, message
    assert "'not' failed" not in message


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"rollout": {"replicas": 0}}, "/rollout/replicas"),
        (
            {"valueTrainer": {"resources": {"limits": {"nvidia.com/gpu": "lots"}}}},
            "/valueTrainer/resources/limits/nvidia.com~1gpu",
        ),
        ({"policyTrainer": {"nodeSelecter": {}}}, "/policyTrainer"),
        ({"weights": {"accessModes": ["ReadWriteOnce"]}}, "/weights/accessModes"),
        ({"api": {"auth": {"tokens": {"alice": "plain-token"}}}}, "/api/auth/tokens/alice"),
        (
            {"rollout": {"tolerations": [{"key": "x", "operator": "Maybe"}]}},
            "/rollout/tolerations/0/operator",
        ),
        ({"api": {"launcher": "slurm"}}, "/api/launcher"),
        ({"redis": {"appendfsync": "sometimes"}}, "/redis/appendfsync"),
        (
            {"environmentVerifier": {"resources": {"requests": {"cpu": None}}}},
            "/environmentVerifier/resources/requests",
        ),
        ({"api": {"tenantPolicies": {"alice": {"maxGpus": -1}}}}, "/api/tenantPolicies/alice/maxGpus"),
        ({"api": {"tenantPolicies": {"alice": {"secretz": []}}}}, "/api/tenantPolicies/alice"),
        ({"api": {"tenantPolicies": {"Alice!": {}}}}, "invalid propertyName 'Alice!'"),
        ({"api": {"maxBodyBytes": 10}}, "/api/maxBodyBytes"),
        ({"rollout": {"pdb": {"enabled": True}}}, "/rollout"),
    ],
)
def test_values_schema_rejects_bad_values(values: dict[str, Any], path: str) -> None:
    from helm_python import HelmValuesError

    with pytest.raises(HelmValuesError) as caught:
        render_templates(values)
    assert path in str(caught.value)


def test_notes_explain_how_to_reach_the_api() -> None:
    notes = render_templates({})["lecritique/templates/NOTES.txt"]
    assert f"svc/{RELEASE}-lecritique-api" in notes and "lecritique api hash-token" in notes


def test_the_api_pod_environment_is_what_the_api_reads() -> None:
    """Every LECRITIQUE_API_* variable the chart sets is an ApiSettings field, and the files it names are mounted."""
    from services.api.settings import PREFIX, ApiSettings

    deployment = one(render_objects(), "Deployment", "-api")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {item["name"]: item.get("value", "from-the-downward-api") for item in container["env"]}
    for name in env:
        if name.startswith(PREFIX):
            assert name.removeprefix(PREFIX).lower() in ApiSettings.model_fields, name
    settings = ApiSettings.from_env(env)
    assert settings.launcher == "kubernetes"
    # As the `api` ACL user; Kubernetes expands $(LECRITIQUE_REDIS_PASSWORD), defined before it, from the Secret.
    assert settings.redis_url == f"redis://api:$(LECRITIQUE_REDIS_PASSWORD)@{RELEASE}-lecritique-redis:6379/0"
    names = [item["name"] for item in container["env"]]
    assert names.index("LECRITIQUE_REDIS_PASSWORD") < names.index("LECRITIQUE_API_REDIS_URL")
    password = next(i for i in container["env"] if i["name"] == "LECRITIQUE_REDIS_PASSWORD")["valueFrom"][
        "secretKeyRef"
    ]
    assert password == {"name": f"{RELEASE}-lecritique-redis-auth", "key": "api-password"}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert str(settings.tokens_file) == f"{mounts['tokens']}/tokens.json"
    assert (
        volumes["tokens"]["secret"]["secretName"]
        == one(render_objects(), "Secret", "-api-tokens")["metadata"]["name"]
    )
    assert str(settings.launcher_defaults) == f"{mounts['launcher-defaults']}/launcher-defaults.json"
    assert (
        volumes["launcher-defaults"]["configMap"]["name"]
        == one(render_objects(), "ConfigMap", "-api-launcher-defaults")["metadata"]["name"]
    )
    assert next(i for i in container["env"] if i["name"] == "LECRITIQUE_API_NAMESPACE")["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }


def test_tenant_policies_from_values_are_what_the_api_enforces() -> None:
    from lecritique.tenancy.policy import resolve_policy
    from services.api.settings import ApiSettings

    policies = {
        "*": {"maxGpus": 2, "modelRoots": ["/weights/models/shared"]},
        "research": {
            "secrets": ["openai-research"],
            "llmEndpoints": ["https://api.openai.com/v1"],
            "maxGpus": 16,
        },
    }
    deployment = one(
        render_objects({"api": {"tenantPolicies": policies, "maxBodyBytes": 65536}}), "Deployment", "-api"
    )
    env = {
        i["name"]: i.get("value", "") for i in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    settings = ApiSettings.from_env(env)
    assert settings.max_body_bytes == 65536 and settings.models_root == "/weights/models"
    research = resolve_policy(settings.tenant_policies, "research")
    assert (
        research.max_gpus == 16
        and research.secrets == ("openai-research",)
        and research.model_roots == ("/weights/models/shared",)
    )
    assert resolve_policy(settings.tenant_policies, "someone").max_gpus == 2
