"""Rendering the Helm chart with Helm's own engine (helm-python-sdk) and small spec builders.

Shared by tests/chart, tests/k8s and tests/api.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "lecritique"
GPU_VALUES_FILE = ROOT / "helm" / "values-gpu-pools.yaml"
DASHBOARDS = ROOT / "helm" / "lecritique" / "dashboards"
KUBERNETES_VERSION = "1.37"
RELEASE = "demo"
NAMESPACE = "ml"


OPERATOR_TOKEN_HASH = "sha256:" + "5e" * 32
"""A token hash of the operator's own, as every real install passes one (the chart refuses to install without)."""


def helm_script(name: str) -> Any:
    """A generator script of ``helm/`` (``generate_seccomp``, ...) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "helm" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpu_values() -> dict[str, Any]:
    return dict(yaml.safe_load(GPU_VALUES_FILE.read_text()))


def with_operator_token(values: dict[str, Any] | None) -> dict[str, Any]:
    """``values`` plus ``api.auth.tokens.ops``, unless they already name tokens or an existing Secret."""
    values = dict(values or {})
    api = dict(values.get("api") or {})
    auth = dict(api.get("auth") or {})
    if not auth.get("tokens") and not auth.get("existingSecret"):
        auth["tokens"] = {"ops": OPERATOR_TOKEN_HASH}
    return {**values, "api": {**api, "auth": auth}}


def render_templates(
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    operator_token: bool = True,
) -> dict[str, str]:
    """Template path -> rendered text (with :func:`with_operator_token` unless ``operator_token`` is False)."""
    from helm_python import Chart

    chart = Chart.load(str(CHART))
    try:
        return dict(
            chart.render(
                with_operator_token(values) if operator_token else values or {},
                name=release,
                namespace=namespace,
            )
        )
    finally:
        chart.close()


@lru_cache(maxsize=8)
def _render_cached(values_json: str, release: str, namespace: str) -> str:
    rendered = render_templates(json.loads(values_json), release=release, namespace=namespace)
    objects = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        for document in yaml.safe_load_all(rendered[path]):
            if document:
                objects.append({"template": path, "object": document})
    return json.dumps(objects)


def render_objects(
    values: dict[str, Any] | None = None, *, release: str = RELEASE, namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """Every object the chart renders (fresh copies; rendering is cached per values)."""
    rows = json.loads(_render_cached(json.dumps(values or {}, sort_keys=True), release, namespace))
    return [row["object"] for row in rows]


def render_objects_with_templates(values: dict[str, Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    rows = json.loads(_render_cached(json.dumps(values or {}, sort_keys=True), RELEASE, NAMESPACE))
    return [(row["template"], row["object"]) for row in rows]


def find(objects: list[dict[str, Any]], kind: str, name_suffix: str = "") -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]


def one(objects: list[dict[str, Any]], kind: str, name_suffix: str) -> dict[str, Any]:
    matches = find(objects, kind, name_suffix)
    assert len(matches) == 1, (
        f"expected one {kind} named *{name_suffix}, found {[m['metadata']['name'] for m in matches]}"
    )
    return matches[0]


def launcher_defaults(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chart's launcher-defaults.json (what the API's kubernetes launcher reads)."""
    config_map = one(render_objects(values), "ConfigMap", "-api-launcher-defaults")
    return dict(json.loads(config_map["data"]["launcher-defaults.json"]))


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec of a workload object (empty for other kinds)."""
    if obj["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
        return [obj["spec"]["template"]["spec"]]
    if obj["kind"] == "Pod":
        return [obj["spec"]]
    return []


def spec_data(**sections: Any) -> dict[str, Any]:
    """A small valid experiment spec (sudoku-mini, TETHER with a PVF critic) as JSON data."""
    data: dict[str, Any] = {
        "name": "sudoku-mini",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
        "policy": {"path": "/weights/models/policy"},
        "critic": {"kind": "discriminative", "context": "reference"},
    }
    data.update(sections)
    return data


def load_dashboards() -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON of every dashboard the chart ships."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def all_dashboard_metric_names() -> dict[str, set[str]]:
    """Metric name -> '<file>: <where>' for every dashboard in the chart."""
    from lecritique.monitoring import dashboard_metric_names

    names: dict[str, set[str]] = {}
    for file_name, dashboard in load_dashboards().items():
        for name, places in dashboard_metric_names(dashboard).items():
            names.setdefault(name, set()).update(f"{file_name}: {place}" for place in places)
    return names


def tiny_spec_data(name: str, steps: int, policy_path: Path) -> dict[str, Any]:
    """A few-step 4x4 Sudoku experiment: TETHER with two position buckets, a reference-context critic,
    a replay buffer of one policy batch whose entries are evicted after one use. One or two empty
    cells, so that even the barely trained ``tests.tiny_policies.quick_policy`` sometimes solves a puzzle: rewards
    vary, so explained variance is defined (each critic batch is a whole policy batch, so a
    success reaches the critic's training batch too)."""
    return {
        "name": name,
        "seed": 0,
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(policy_path)},
        "rollout": {"group_size": 4, "tasks_per_step": 32, "sampling": {"max_tokens": 8}},
        "estimator": {"name": "tether", "buckets": 2},
        "critic": {
            "kind": "discriminative",
            "context": "reference",
            "warmup_updates": 1,
            "replay": {"capacity": 128, "max_reuse": 1},
        },
        "orchestrator": {"steps": steps, "max_off_policy_steps": 0, "eval_every": 4, "eval_tasks": 4},
    }


def redis_user_url(url: str, user: str, password: str) -> str:
    """``redis://host:port/db`` with ``user:password@`` inserted (a Redis ACL user's URL)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{user}:{password}@{rest.rpartition('@')[2]}"
