"""``lecritique chart render``: the chart without a helm binary (issue #41, item 5) gives the
objects the chart tests render with Helm's engine, values files and ``--set`` merged as helm does."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from lecritique.cli.chart import set_value
from lecritique.cli.main import app
from lecritique.config.documents import merge_documents as merge_values
from tests.helm_support import CHART, GPU_VALUES_FILE, OPERATOR_TOKEN_HASH, gpu_values, render_objects


def test_the_rendered_objects_are_the_chart_tests_own(tmp_path: Path) -> None:
    out = tmp_path / "objects.yaml"
    done = CliRunner().invoke(
        app,
        [
            "chart", "render", "--chart", str(CHART), "--values", str(GPU_VALUES_FILE),
            "--set", f"api.auth.tokens.ops={OPERATOR_TOKEN_HASH}", "--name", "demo", "--namespace", "ml",
            "--out", str(out),
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    rendered = [doc for doc in yaml.safe_load_all(out.read_text()) if doc]
    expected = render_objects({**gpu_values(), "api": {"auth": {"tokens": {"ops": OPERATOR_TOKEN_HASH}}}})
    assert sorted((o["kind"], o["metadata"]["name"]) for o in rendered) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in expected
    )
    assert out.read_text().count("# Source: lecritique/templates/") == len(rendered)


def test_a_chart_failure_is_reported_with_helms_message() -> None:
    done = CliRunner().invoke(app, ["chart", "render", "--chart", str(CHART)])
    assert done.exit_code == 1 and "api.auth.tokens is empty" in done.output


def test_set_and_values_merge_as_helm_merges_them() -> None:
    values = merge_values({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"c": 3}, "d": [2]})
    assert values == {"a": {"b": 1, "c": 3}, "d": [2]}
    assert set_value(values, "a.e.f=true") == {"a": {"b": 1, "c": 3, "e": {"f": True}}, "d": [2]}
    assert set_value({}, "x=sha256:ab")["x"] == "sha256:ab"
    assert set_value({"a": {"b": 1, "c": 2}}, "a.b=null") == {"a": {"c": 2}}  # null deletes, as in Helm
    with pytest.raises(typer.BadParameter, match="KEY.PATH=VALUE"):
        set_value({}, "a..b=1")


def test_experiment_preview_prints_each_pods_placement_and_resources(tmp_path: Path) -> None:
    """Issue 48 item 4: the GPU node-pool settings were visible only inside the launcher's ConfigMap
    JSON. The preview is what the kubernetes launcher itself renders from the chart's defaults."""
    from lecritique.config import load_spec
    from lecritique.launch.kubernetes.render import render_experiment_objects
    from tests.helm_support import ROOT, launcher_defaults, pod_specs

    spec = ROOT / "examples" / "sudoku-mini-pvf.yaml"
    out = tmp_path / "experiment.yaml"
    done = CliRunner().invoke(
        app,
        [
            "chart", "render", "--chart", str(CHART), "--values", str(GPU_VALUES_FILE),
            "--set", "imagePullSecrets=[{name: mycorp-pull}]", "--experiment", str(spec),
            "--experiment-id", "exp-look", "--out", str(out),
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    head, body = done.stdout.split("\n", 1)
    assert head.startswith(f"# experiment exp-look of {spec} in namespace lecritique")
    printed = yaml.safe_load(body)["pods"]
    values = {**gpu_values(), "imagePullSecrets": [{"name": "mycorp-pull"}]}
    expected = render_experiment_objects(load_spec(spec), "exp-look", launcher_defaults(values))
    workloads = {o["metadata"]["labels"]["app.kubernetes.io/component"]: o for o in expected if pod_specs(o)}
    assert set(printed) == set(workloads) >= {"orchestrator", "rollout", "policy-trainer", "value-trainer"}
    for component, workload in workloads.items():
        pod = pod_specs(workload)[0]
        shown = printed[component]
        assert shown["nodeSelector"] == pod["nodeSelector"] and shown.get("tolerations") == pod.get(
            "tolerations"
        )
        assert shown["imagePullSecrets"] == [{"name": "mycorp-pull"}]
        assert [c["resources"] for c in shown["containers"]] == [c["resources"] for c in pod["containers"]]
    rollout = printed["rollout"]
    assert rollout["nodeSelector"] == {"lecritique.dev/pool": "rollout"}
    assert rollout["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    written = [doc for doc in yaml.safe_load_all(out.read_text()) if doc]
    assert [(o["kind"], o["metadata"]["name"]) for o in written] == [
        (o["kind"], o["metadata"]["name"]) for o in expected
    ]


def test_experiment_preview_of_a_spec_that_cannot_be_placed_names_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "bad",
                "environment": {"kind": "sudoku"},
                "policy": {"path": "/weights/models/t/p"},
                "estimator": {"name": "mean"},
                "placement": {"rollout": {"resources": {"requests": {"cpu": "8"}, "limits": {"cpu": "2"}}}},
            }
        )
    )
    done = CliRunner().invoke(app, ["chart", "render", "--chart", str(CHART), "--experiment", str(spec)])
    assert done.exit_code == 2, done.output
    assert "placement.rollout" in done.output
