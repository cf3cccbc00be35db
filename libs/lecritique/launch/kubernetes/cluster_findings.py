"""What a cluster refuses of a spec, as findings: the ``cluster`` context of :mod:`lecritique.config.findings`.

The chart's launcher defaults (``launcher-defaults.json``: per component its requests, limits and
GPUs per node) decide whether a spec's placement can be scheduled, so these rules cannot live with
the spec's own: a laptop runs what a cluster refuses. The API's kubernetes launcher renders through
:func:`~lecritique.launch.kubernetes.render.render_experiment_objects`, which raises every one of
them at once (:class:`~lecritique.config.findings.SpecRefused`), and ``lecritique chart render
--experiment`` prints the same list before it renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lecritique.config.findings import Finding
from lecritique.config.placement import ComponentPlacement
from lecritique.launch.components import COMPONENTS, ChartDefaults
from lecritique.launch.kubernetes.names import component_names
from lecritique.launch.kubernetes.resources import checked_resources


@dataclass(frozen=True)
class ClusterFindings:
    """The cluster the chart's launcher defaults describe, as a :class:`~lecritique.config.findings.FindingContext`."""

    defaults: ChartDefaults
    name: str = "cluster"

    def findings(self, spec: Any) -> list[Finding]:
        """Every component's placement checked against the chart's defaults, in the order the
        components are rendered."""
        found: list[Finding] = []
        for component in component_names(spec):
            placed: ComponentPlacement = getattr(spec.placement, COMPONENTS[component].placement_key)
            _, refused = checked_resources(component, self.defaults.components.of(component), placed, spec)
            found.extend(refused)
        return found
