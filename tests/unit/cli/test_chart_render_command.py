"""``lecritique chart render``: the chart without a helm binary (issue #41, item 5) gives the
objects the chart tests render with Helm's engine, values files and ``--set`` merged as helm does."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from lecritique.cli.chart import merge_values, set_value
from lecritique.cli.main import app
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
    with pytest.raises(typer.BadParameter, match="KEY.PATH=VALUE"):
        set_value({}, "a..b=1")
