"""Monitoring helpers: which metric names PromQL expressions and Grafana dashboards refer to."""

from lecritique.monitoring.dashboards import dashboard_expressions, dashboard_metric_names
from lecritique.monitoring.promql import exposition_metric_names, promql_metric_names

__all__ = [
    "dashboard_expressions",
    "dashboard_metric_names",
    "exposition_metric_names",
    "promql_metric_names",
]
