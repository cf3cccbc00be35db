"""The PromQL expressions of Grafana dashboard JSON (panels, nested rows, variables, annotations)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lecritique.monitoring.promql import grafana_query_metric_names, promql_metric_names


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, expression)`` for every query: panel targets, then variable and annotation queries.

    ``where`` is ``"panel <title>"`` or ``"variable <name>"``; variable queries keep Grafana's
    query syntax (``label_values(...)``).
    """
    found: list[tuple[str, str]] = []
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                found.append((f"panel {panel.get('title', panel.get('id'))!r}", target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        if text:
            found.append((f"variable {variable.get('name')!r}", str(text)))
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if annotation.get("expr"):
            found.append((f"annotation {annotation.get('name')!r}", annotation["expr"]))
    return found


def dashboard_metric_names(dashboard: dict[str, Any]) -> dict[str, set[str]]:
    """Metric name -> where in the dashboard it is used."""
    names: dict[str, set[str]] = {}
    for where, expression in dashboard_expressions(dashboard):
        extract = grafana_query_metric_names if where.startswith("variable") else promql_metric_names
        for name in extract(expression):
            names.setdefault(name, set()).add(where)
    return names
