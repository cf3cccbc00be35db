"""Names and labels of one experiment's Kubernetes objects (which components, what they are called)."""

from __future__ import annotations

import re
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.launch.components import EXPERIMENT_LABEL, ChartDefaults, Component

EXPERIMENT_NAME_ANNOTATION = "lecritique.dev/experiment-name"
"""Annotation holding the spec's human-readable name."""
MANAGED_BY = "lecritique-api"
"""``app.kubernetes.io/managed-by`` of experiment objects (the chart's own objects say Helm)."""

# Short enough that "<id>-environment-verifier" and a StatefulSet's revision-hash label stay
# within Kubernetes' 63-character limits.
EXPERIMENT_ID = re.compile(r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?")
"""An experiment id (matched whole with ``fullmatch``)."""


def component_names(spec: ExperimentSpec) -> list[Component]:
    """The components this experiment runs (no critic: no value-evaluator or value-trainer)."""
    names = [Component.environment_verifier, Component.policy_trainer, Component.rollout]
    if spec.critic is not None:
        names += [Component.value_trainer, Component.value_evaluator]
    return [*names, Component.orchestrator]


def object_name(experiment_id: str, component: Component | str) -> str:
    """Name of a component's objects (Service, workload) of one experiment."""
    return f"{experiment_id}-{component}"


def selector_labels(defaults: ChartDefaults, experiment_id: str, component: Component) -> dict[str, str]:
    """Labels that select exactly one experiment's pods of one component."""
    return {
        "app.kubernetes.io/instance": defaults.release,
        "app.kubernetes.io/component": component.value,
        EXPERIMENT_LABEL: experiment_id,
    }


def object_labels(defaults: ChartDefaults, experiment_id: str, component: Component | None) -> dict[str, str]:
    labels = {
        **defaults.labels,
        "app.kubernetes.io/instance": defaults.release,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        EXPERIMENT_LABEL: experiment_id,
    }
    if component is not None:
        labels["app.kubernetes.io/component"] = component.value
    return labels


def object_metadata(
    defaults: ChartDefaults, experiment_id: str, name: str, component: Component | None, spec: ExperimentSpec
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": defaults.namespace,
        "labels": object_labels(defaults, experiment_id, component),
        "annotations": {EXPERIMENT_NAME_ANNOTATION: spec.name},
    }
