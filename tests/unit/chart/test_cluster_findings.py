"""Cluster refusals are findings with a context (issue 47, item 4): every one at once, the same list
from the cluster's rules, the renderer the API's kubernetes launcher calls, and
``lecritique chart render --experiment``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.config.experiment import parse_spec
from lecritique.config.findings import Finding, SpecRefused, spec_findings
from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.cluster_findings import ClusterFindings
from lecritique.launch.kubernetes.render import render_experiment_objects
from tests.helm_support import CHART, launcher_defaults, spec_data

UNPLACEABLE = spec_data(
    policy_trainer={"processes": 2},
    critic={"kind": "discriminative", "context": "reference", "processes": 6, "processes_per_node": 4},
    placement={
        "rollout": {"resources": {"requests": {"cpu": "8", "memory": "100Gi"}, "limits": {"cpu": "2"}}},
        "policy_trainer": {"resources": {"limits": {"nvidia.com/gpu": "3"}}},
    },
)
FIELDS = [
    "placement.policy_trainer.resources.limits.nvidia.com/gpu",
    "placement.rollout.resources.requests.cpu",
    "placement.rollout.resources.requests.memory",
    "critic.processes",
]
"""In the order the components render: policy trainer, rollout, value trainer; each request in
the order the chart and the spec declare it."""


@pytest.fixture(scope="module")
def defaults() -> ChartDefaults:
    return ChartDefaults.model_validate(launcher_defaults())


def test_the_cluster_lists_every_placement_it_refuses_not_the_first(defaults: ChartDefaults) -> None:
    spec = parse_spec(UNPLACEABLE)
    found = ClusterFindings(defaults).findings(spec)
    assert sorted(f.field for f in found) == sorted(FIELDS)
    assert {(f.level, f.context) for f in found} == {("error", "cluster")}
    assert all(f.text.startswith(f"{f.field}: ") for f in found)
    # The spec alone is fine (a laptop runs it): the refusals come with the cluster's context.
    assert [f for f in spec_findings(spec) if f.level == "error"] == []
    errors = [f for f in spec_findings(spec, [ClusterFindings(defaults)]) if f.level == "error"]
    assert errors == found


def test_the_renderer_refuses_with_the_same_list(defaults: ChartDefaults) -> None:
    spec = parse_spec(UNPLACEABLE)
    with pytest.raises(SpecRefused) as refused:
        render_experiment_objects(spec, "exp-cluster", defaults)
    assert refused.value.findings == ClusterFindings(defaults).findings(spec)
    assert str(refused.value).splitlines() == [f.text for f in refused.value.findings]


def test_a_placeable_spec_has_no_cluster_finding(defaults: ChartDefaults) -> None:
    assert ClusterFindings(defaults).findings(parse_spec(spec_data())) == []


def test_chart_render_prints_the_same_list_and_renders_nothing(
    tmp_path: Path, defaults: ChartDefaults
) -> None:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(UNPLACEABLE))
    out = tmp_path / "objects.yaml"
    done = CliRunner().invoke(
        app, ["chart", "render", "--chart", str(CHART), "--experiment", str(spec_path), "--out", str(out)]
    )
    assert done.exit_code == 2, done.output
    expected = ClusterFindings(defaults).findings(parse_spec(UNPLACEABLE))
    printed = [line for line in done.output.splitlines() if line.startswith("error (cluster): ")]
    assert printed == [f"error (cluster): {f.text}" for f in expected]
    assert not out.exists()


def test_a_refusal_needs_an_error() -> None:
    with pytest.raises(ValueError, match="at least one error"):
        SpecRefused([Finding("orchestrator.eval_every", "warning", "never reached")])
