"""The API runs on its image's requirement set alone: a fresh interpreter (a process) that can
import only those distributions (the set itself is checked in tests/unit/k8s/test_dockerfiles.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from packaging.utils import canonicalize_name

from tests.helm_support import launcher_defaults
from tests.unit.k8s.test_dockerfiles import ROOT, _api_set

_RUN_THE_API = """
import importlib.abc, importlib.machinery, json, pathlib, sys
allowed = set(json.loads(sys.argv[1]))

class OnlyTheApiImage(importlib.abc.MetaPathFinder):
    # Refuses a module installed in site-packages by a distribution outside the image's set.

    def find_spec(self, name, path, target=None):
        top = name.partition(".")[0]
        if top in allowed or top in sys.stdlib_module_names:
            return None
        found = importlib.machinery.PathFinder.find_spec(top)
        if found is None or "site-packages" not in (found.origin or str(found.submodule_search_locations)):
            return None
        raise ModuleNotFoundError(f"No module named {name!r} in the API image", name=name)

sys.meta_path.insert(0, OnlyTheApiImage())

import importlib, pkgutil
import services.api
for module in pkgutil.walk_packages(services.api.__path__, "services.api."):
    importlib.import_module(module.name)
from kubernetes import client
from lecritique.config import load_spec
from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.render import render_experiment_objects
from lecritique.launch.kubernetes.launcher import KubernetesLauncher
from lecritique.reporting import write_report
from services.api.app import create_app
from services.api.settings import ApiSettings

launcher = KubernetesLauncher(ChartDefaults.model_validate_json(sys.argv[2]), api_client=client.ApiClient())
app = create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0", launcher="kubernetes"), launcher=launcher)
app.openapi()
for path in sorted(p for p in pathlib.Path(sys.argv[3]).glob("**/*.yaml") if "studies" not in p.parts):
    render_experiment_objects(load_spec(path), "exp1", launcher.defaults)
run = pathlib.Path(sys.argv[4])
run.joinpath("metrics.jsonl").write_text(json.dumps({"step": 0, "reward_mean": 0.5}) + "\\n")
write_report(run, title="api image")
print(json.dumps(sorted(m for m in ("torch", "transformers", "vllm", "grpc") if m in sys.modules)))
"""


def _importable_names(distributions: set[str]) -> set[str]:
    names = {"lecritique", "services"}
    for top, owners in metadata.packages_distributions().items():
        if any(canonicalize_name(owner) in distributions for owner in owners):
            names.add(top)
    return names


def test_the_api_runs_on_its_image_requirement_set_alone(tmp_path):
    """A fresh interpreter that can import only the API image's distributions builds the app,
    renders every example experiment for Kubernetes and writes a report."""
    allowed = _importable_names(set(_api_set()))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_THE_API,
            json.dumps(sorted(allowed)),
            json.dumps(launcher_defaults()),
            str(ROOT / "examples"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={
            "PYTHONPATH": f"{ROOT / 'libs'}:{ROOT}",
            "PATH": "/usr/bin:/bin",
            "MPLBACKEND": "Agg",
            "HOME": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
    assert (tmp_path / "report.md").exists()
