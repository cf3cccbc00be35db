"""The environment verifier's pods as the chart and the kubernetes launcher make them (issue #37, item 3).

The verifier runs code a policy wrote, so it mounts the weight volume read-only and only its tenant's
dataset folders (``subPath``), whatever the sandbox can do in it. Its seccomp profile is the runtime's
default unless ``environmentVerifier.sandbox.namespaces``: then the Localhost profile the chart
ships (``files/sandbox-namespaces.json``, the default plus what the sandbox's set-up calls), a pod
user namespace and an unmasked /proc. Rendered by Helm's own engine, the launcher reading the
chart's launcher-defaults.json, the tenant's dataset roots computed from the API's own settings.
tests/integration/containers/test_sandbox_seccomp.py runs the sandbox under both profiles.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from lecritique.config.experiment import parse_spec
from lecritique.envs._sandbox import kernel
from lecritique.launch.kubernetes.render import EXPERIMENT_LABEL, render_experiment_objects
from lecritique.tenancy.policy import resolve_policy
from lecritique.tenancy.spec_rules import tenant_dataset_roots
from services.api.settings import ApiSettings
from tests.helm_support import (
    CHART,
    KUBERNETES_VERSION,
    ROOT,
    find,
    helm_script,
    launcher_defaults,
    one,
    render_objects,
    render_templates,
    spec_data,
)

PROFILE = CHART / "files" / "sandbox-namespaces.json"
MOBY_DEFAULT = ROOT / "helm" / "seccomp" / "moby-default.json"
OCI_SCHEMA = Path(__file__).with_name("oci_seccomp.schema.json")
EXPERIMENT = "exp-0123456789"
POLICIES = {"*": {"datasetRoots": ["/weights/datasets/shared", "/srv/corpora"]}}
GENERATOR = helm_script("generate_seccomp")


def unconditionally_allowed(profile: dict[str, Any]) -> set[str]:
    """Calls an OCI profile allows whatever their arguments."""
    return {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
        for name in rule["names"]
    }


def allowed_rules(profile: dict[str, Any]) -> set[tuple[str, str]]:
    """(call, its argument condition as JSON, "" for none) of every allow rule of an OCI profile."""
    return {
        (name, json.dumps(rule.get("args") or [], sort_keys=True) if rule.get("args") else "")
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }


def _moby_default() -> dict[str, Any]:
    return dict(json.loads(MOBY_DEFAULT.read_text()))


def _profile() -> dict[str, Any]:
    return dict(json.loads(PROFILE.read_text()))


def _experiment_pods(values: dict[str, Any], tenant: str = "alice") -> dict[str, dict[str, Any]]:
    """Component -> pod spec of one experiment, as the API would create it for ``tenant`` in a release of ``values``."""
    values = {**values, "api": {"tenantPolicies": POLICIES}}
    deployment = one(render_objects(values), "Deployment", "-api")
    env = {
        i["name"]: i.get("value", "") for i in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    settings = ApiSettings.from_env(env)
    roots = tenant_dataset_roots(
        tenant, resolve_policy(settings.tenant_policies, tenant), settings.datasets_root
    )
    objects = render_experiment_objects(
        parse_spec(spec_data()), EXPERIMENT, launcher_defaults(values), dataset_roots=tuple(roots)
    )
    pods = {}
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        if obj["kind"] in ("Deployment", "StatefulSet", "Job"):
            component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            assert obj["metadata"]["labels"][EXPERIMENT_LABEL] == EXPERIMENT
            pods[component] = obj["spec"]["template"]["spec"]
    return pods


def _weights_mounts(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "weights"]


def test_the_verifier_mounts_only_its_tenants_datasets_read_only() -> None:
    pods = _experiment_pods({})
    assert sorted(_weights_mounts(pods["environment-verifier"]), key=lambda m: m["mountPath"]) == [
        {
            "name": "weights",
            "mountPath": "/weights/datasets/alice",
            "subPath": "datasets/alice",
            "readOnly": True,
        },
        {
            "name": "weights",
            "mountPath": "/weights/datasets/shared",
            "subPath": "datasets/shared",
            "readOnly": True,
        },
    ], "not the whole volume, not another tenant's folder, not a root off the volume (/srv/corpora)"
    for component, pod in pods.items():
        if component != "environment-verifier":
            assert _weights_mounts(pod) == [{"name": "weights", "mountPath": "/weights"}], component
    bob = _experiment_pods({}, tenant="bob")["environment-verifier"]
    assert {m["subPath"] for m in _weights_mounts(bob)} == {"datasets/bob", "datasets/shared"}


def test_by_default_every_pod_runs_under_the_runtimes_default_seccomp_profile() -> None:
    for component, pod in _experiment_pods({}).items():
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, component
        assert "hostUsers" not in pod and "procMount" not in pod["containers"][0]["securityContext"]
    assert find(render_objects({}), "DaemonSet") == []


def test_with_sandbox_namespaces_the_verifier_gets_the_shipped_profile_a_user_namespace_and_proc() -> None:
    values = {
        "environmentVerifier": {"sandbox": {"namespaces": True, "appArmorProfile": "lecritique-sandbox"}},
    }
    pods = _experiment_pods(values)
    verifier = pods.pop("environment-verifier")
    assert verifier["securityContext"]["seccompProfile"] == {
        "type": "Localhost",
        "localhostProfile": "lecritique/sandbox-namespaces.json",
    }
    assert verifier["hostUsers"] is False
    context = verifier["containers"][0]["securityContext"]
    assert context["procMount"] == "Unmasked"
    assert context["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "lecritique-sandbox"}
    assert context["capabilities"] == {"drop": ["ALL"]} and context["allowPrivilegeEscalation"] is False
    assert all(m["readOnly"] for m in _weights_mounts(verifier))
    for component, pod in pods.items():
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, component
        assert "hostUsers" not in pod, component


def test_the_daemonset_installs_the_profile_where_the_verifier_runs() -> None:
    placement = {
        "nodeSelector": {"pool": "cpu"},
        "tolerations": [{"key": "pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}],
    }
    values = {
        "sandboxProfiles": {"install": True, "kubeletRoot": "/var/lib/k0s/kubelet"},
        "environmentVerifier": {
            **placement,
            "sandbox": {"namespaces": True, "seccompProfile": "team/verifier.json"},
        },
    }
    objects = render_objects(values)
    daemonset = one(objects, "DaemonSet", "-sandbox-profiles")
    config_map = one(objects, "ConfigMap", "-sandbox-profiles")
    for obj in (daemonset, config_map):
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert json.loads(config_map["data"]["sandbox-namespaces.json"]) == _profile()
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == placement["nodeSelector"] and pod["tolerations"] == placement["tolerations"]
    host = next(v for v in pod["volumes"] if v["name"] == "seccomp")["hostPath"]
    assert host == {"path": "/var/lib/k0s/kubelet/seccomp", "type": "DirectoryOrCreate"}
    [container] = pod["containers"]
    assert {"name": "PROFILE", "value": "team/verifier.json"} in container["env"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    verifier = _experiment_pods(values)["environment-verifier"]
    assert verifier["securityContext"]["seccompProfile"]["localhostProfile"] == "team/verifier.json"


@pytest.mark.parametrize(
    ("values", "path"),
    [
        (
            {"environmentVerifier": {"sandbox": {"seccompProfile": "../../etc/cron.d/x.json"}}},
            "/environmentVerifier/sandbox/seccompProfile",
        ),
        (
            {"environmentVerifier": {"sandbox": {"appArmorProfile": "unconfined profile"}}},
            "/environmentVerifier/sandbox/appArmorProfile",
        ),
        ({"sandboxProfiles": {"kubeletRoot": "relative/kubelet"}}, "/sandboxProfiles/kubeletRoot"),
        ({"sandboxProfiles": {"kubeletRoot": "/var/lib/../../etc"}}, "/sandboxProfiles/kubeletRoot"),
    ],
)
def test_the_values_schema_refuses_bad_profile_settings(values: dict[str, Any], path: str) -> None:
    from helm_python import HelmValuesError

    with pytest.raises(HelmValuesError) as caught:
        render_templates(values)
    assert path in str(caught.value)


def test_the_profile_is_the_generators_output() -> None:
    assert PROFILE.read_text() == GENERATOR.render(), "stale: run python helm/generate_seccomp.py"


def test_the_profile_is_an_oci_seccomp_object_without_conditions() -> None:
    """containerd reads a Localhost profile as the OCI LinuxSeccomp: a moby-style ``includes`` would
    be dropped and its rule would apply to every container."""
    schema = json.loads(OCI_SCHEMA.read_text())
    profile = _profile()
    jsonschema.Draft4Validator(schema).validate(profile)
    assert set(profile) <= set(schema["properties"])
    rule_keys = set(schema["definitions"]["Syscall"]["properties"])
    assert all(set(rule) <= rule_keys for rule in profile["syscalls"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate({**profile, "defaultAction": "ALLOW"})


def test_the_profile_allows_what_the_default_allows_and_only_the_sandboxs_calls_more() -> None:
    default, profile = GENERATOR.resolve_default(_moby_default()), _profile()
    assert allowed_rules(default) <= allowed_rules(profile)
    added = {name for name, args in allowed_rules(profile) - allowed_rules(default)}
    assert added == {*GENERATOR.SANDBOX_SYSCALLS, *GENERATOR.CONTAINERD_EXTRAS}
    denied = [rule for rule in default["syscalls"] if rule["action"] != "SCMP_ACT_ALLOW"]
    assert denied and all(rule in profile["syscalls"] for rule in denied), "clone3 still answers ENOSYS"
    assert profile["defaultAction"] == default["defaultAction"] == "SCMP_ACT_ERRNO"
    assert {"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"} <= set(profile["architectures"])
    # The default refuses a container without CAP_SYS_ADMIN what the sandbox adds; clone keeps its rule.
    assert not set(GENERATOR.SANDBOX_SYSCALLS) & unconditionally_allowed(default)
    assert "clone" not in unconditionally_allowed(profile)


def test_the_added_calls_are_what_the_sandbox_calls_and_the_default_refuses() -> None:
    """Every libc function the sandbox's kernel bindings call, less what the default allows anyway."""
    tree = ast.parse(Path(kernel.__file__).read_text())
    called = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "libc"
    }
    assert called - unconditionally_allowed(GENERATOR.resolve_default(_moby_default())) == set(
        GENERATOR.SANDBOX_SYSCALLS
    )
