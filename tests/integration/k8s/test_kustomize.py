"""k8s/: a kustomize base and a GPU-pool overlay, generated from the chart, that kubectl builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from tests.helm_support import KUBERNETES_VERSION, ROOT, gpu_values

K8S = ROOT / "k8s"


def _build(directory: Path) -> list[dict[str, Any]]:
    # kubectl (with its built-in kustomize) is part of the dev/CI machine, like Helm's Go SDK.
    result = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_committed_tree_equals_the_generator_output() -> None:
    sys.path.insert(0, str(K8S))
    try:
        import generate  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(K8S))
    files = generate.generate()
    for path, text in files.items():
        assert path.read_text() == text, f"{path} is stale: run python k8s/generate.py"
    committed = {p for d in ("base", "components", "overlays") for p in (K8S / d).rglob("*.yaml")}
    assert committed == set(files), "k8s/ has files the generator does not write"


def test_base_builds_and_every_object_is_valid() -> None:
    objects = _build(K8S / "base")
    assert {o["kind"] for o in objects} >= {
        "Deployment",
        "StatefulSet",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "PersistentVolumeClaim",
    }
    assert not [o for o in objects if o["kind"] in ("ServiceMonitor", "PrometheusRule")]
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert obj["metadata"]["namespace"] == "lecritique"
        assert "helm.sh/chart" not in obj["metadata"].get("labels", {})


def test_gpu_pool_overlay_builds_with_the_pools_and_service_monitors() -> None:
    objects = _build(K8S / "overlays" / "gpu-pools")
    by_kind_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    defaults = json.loads(
        by_kind_name[("ConfigMap", "lecritique-api-launcher-defaults")]["data"]["launcher-defaults.json"]
    )
    values = gpu_values()
    for key in (
        "rollout",
        "valueEvaluator",
        "valueTrainer",
        "policyTrainer",
        "environmentVerifier",
        "orchestrator",
    ):
        assert defaults["components"][key]["nodeSelector"] == values[key]["nodeSelector"], key
    api = by_kind_name[("Deployment", "lecritique-api")]["spec"]["template"]["spec"]
    assert api["nodeSelector"] == {"lecritique.dev/pool": "system"}
    monitors = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert len(monitors) == 7 and all(
        m["metadata"]["labels"]["release"] == "kube-prometheus-stack" for m in monitors
    )
    rules = [o for o in objects if o["kind"] == "PrometheusRule"]
    assert len(rules) == 1 and rules[0]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for obj in objects:
        if obj["kind"] not in ("ServiceMonitor", "PrometheusRule"):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
