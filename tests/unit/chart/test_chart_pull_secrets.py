"""Image pull secrets in the form most charts take (issue 48 item 4): ``[{name: mycorp-pull}]`` as
well as ``[mycorp-pull]``, and ``global.imagePullSecrets``, on every pod the chart renders and on
every experiment pod the API's kubernetes launcher creates from the chart's launcher defaults.
Rendered by Helm's own template engine (helm-python-sdk), schema included."""

from __future__ import annotations

from typing import Any

import pytest

from lecritique.config import parse_spec
from lecritique.launch.kubernetes.render import render_experiment_objects
from tests.helm_support import launcher_defaults, pod_specs, render_objects, render_templates, spec_data

EVERY_POD = {
    "sandboxProfiles": {"install": True},
    "weights": {
        "stageModel": {
            "enabled": True,
            "tenant": "alice",
            "source": {"persistentVolumeClaim": {"claimName": "hf-models", "readOnly": True}},
            "sourcePath": "Qwen3-4B-Instruct-2507",
        }
    },
}
"""Values that make the chart render every kind of pod it has (the API, Redis, the sandbox
profiles' DaemonSet, the stage-model Job)."""


def _pods(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{obj['kind']}/{obj['metadata']['name']}": spec
        for obj in render_objects({**EVERY_POD, **values})
        for spec in pod_specs(obj)
    }


@pytest.mark.parametrize(
    "values",
    [
        {"imagePullSecrets": [{"name": "mycorp-pull"}, "second"]},
        {"imagePullSecrets": ["second"], "global": {"imagePullSecrets": [{"name": "mycorp-pull"}]}},
    ],
    ids=["objects-and-strings", "global-and-top-level"],
)
def test_every_pod_of_the_chart_and_of_an_experiment_gets_the_pull_secrets(values: dict[str, Any]) -> None:
    expected = [{"name": "mycorp-pull"}, {"name": "second"}]
    pods = _pods(values)
    assert {kind.split("/")[0] for kind in pods} >= {"Deployment", "StatefulSet", "DaemonSet", "Job"}
    for where, spec in pods.items():
        assert spec.get("imagePullSecrets") == expected, where
    defaults = launcher_defaults({**EVERY_POD, **values})
    assert defaults["imagePullSecrets"] == ["mycorp-pull", "second"]
    objects = render_experiment_objects(parse_spec(spec_data()), "exp-pull", defaults)
    experiment_pods = [spec for obj in objects for spec in pod_specs(obj)]
    assert len(experiment_pods) >= 5
    for spec in experiment_pods:
        assert spec["imagePullSecrets"] == expected


def test_no_pull_secrets_renders_no_field_and_duplicates_are_dropped() -> None:
    for spec in _pods({}).values():
        assert "imagePullSecrets" not in spec
    pods = _pods({"imagePullSecrets": ["a", {"name": "a"}], "global": {"imagePullSecrets": ["a"]}})
    assert all(spec["imagePullSecrets"] == [{"name": "a"}] for spec in pods.values())


@pytest.mark.parametrize("entry", [{"nam": "typo"}, {"name": ""}, "", {"name": "x", "namespace": "other"}, 7])
def test_a_malformed_pull_secret_is_refused_by_the_schema(entry: Any) -> None:
    with pytest.raises(Exception, match="at '/imagePullSecrets/0': 'oneOf' failed"):
        render_templates({"imagePullSecrets": [entry]})
