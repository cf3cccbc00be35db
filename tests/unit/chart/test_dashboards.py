"""Grafana dashboards: the metric-name extraction, the generator, and what each dashboard shows."""

from __future__ import annotations

import importlib.util

import pytest

from lecritique.monitoring import (
    dashboard_expressions,
    dashboard_metric_names,
    exposition_metric_names,
    promql_metric_names,
)
from lecritique.monitoring.promql import grafana_query_metric_names
from tests.helm_support import DASHBOARDS, ROOT, all_dashboard_metric_names, load_dashboards


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("up", {"up"}),
        ('lecritique_reward_mean{experiment=~"$experiment"}', {"lecritique_reward_mean"}),
        (
            'histogram_quantile(0.95, sum by (le, experiment) (rate(lecritique_policy_step_seconds_bucket{experiment=~"$experiment"}[$__rate_interval])))',
            {"lecritique_policy_step_seconds_bucket"},
        ),
        (
            'sum(rate(a_total{x="b_total", y!~"c.*"}[5m] offset 1h)) / on(pod) group_left(node) b_info',
            {"a_total", "b_info"},
        ),
        ("sum without (instance) (x) * 1e3 > bool 2.5", {"x"}),
        ("max_over_time(foo[1h:5m]) or vector(0)", {"foo"}),
        ('{__name__="weird_metric", job="j"}', {"weird_metric"}),
        ("count(x) by (le) and on() (y unless z)", {"x", "y", "z"}),
        ("rate(x[${interval}]) - ignoring(code) 0x1F", {"x"}),
        ('label_replace(metric_a, "dst", "$1", "src", "(.*)")', {"metric_a"}),
        ("sum by (experiment) (rate(x_total[1m30s]))", {"x_total"}),
        ('x{pod=~"(${experiment:pipe})-.*"}', {"x"}),
    ],
)
def test_promql_metric_names(expression: str, names: set[str]) -> None:
    assert promql_metric_names(expression) == names


def test_grafana_variable_queries() -> None:
    assert grafana_query_metric_names("label_values(lecritique_orchestrator_step, experiment)") == {
        "lecritique_orchestrator_step"
    }
    assert grafana_query_metric_names('label_values(up{job="x"}, instance)') == {"up"}
    assert grafana_query_metric_names("label_values(experiment)") == set()
    assert grafana_query_metric_names("query_result(topk(5, foo))") == {"foo"}
    assert grafana_query_metric_names("metrics(lecritique_.*)") == set()


def test_exposition_names_include_histogram_and_counter_series() -> None:
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    registry = CollectorRegistry()
    Counter("demo_requests", "d", ["code"], registry=registry).labels("200").inc()
    Histogram("demo_seconds", "d", registry=registry).observe(0.1)
    names = exposition_metric_names(generate_latest(registry).decode())
    assert {"demo_requests_total", "demo_seconds_bucket", "demo_seconds_sum", "demo_seconds_count"} <= names


def test_dashboard_expressions_walk_panels_rows_and_variables() -> None:
    dashboard = {
        "panels": [
            {"type": "row", "title": "r", "panels": [{"title": "inner", "targets": [{"expr": "a"}]}]},
            {"title": "outer", "targets": [{"expr": "b + c"}, {"expr": ""}]},
        ],
        "templating": {
            "list": [
                {"type": "query", "name": "v", "query": {"query": "label_values(d, l)"}},
                {"type": "custom", "name": "w", "query": "x,y"},
            ]
        },
        "annotations": {"list": [{"name": "deploys", "expr": "e"}]},
    }
    assert dashboard_metric_names(dashboard) == {
        "a": {"panel 'inner'"},
        "b": {"panel 'outer'"},
        "c": {"panel 'outer'"},
        "d": {"variable 'v'"},
        "e": {"annotation 'deploys'"},
    }


def test_committed_dashboards_equal_the_generator_output() -> None:
    spec = importlib.util.spec_from_file_location(
        "generate_dashboards", ROOT / "helm" / "generate_dashboards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rendered = module.render_all()
    assert {p.name for p in DASHBOARDS.glob("*.json")} == set(rendered)
    for name, text in rendered.items():
        assert (DASHBOARDS / name).read_text() == text, (
            f"{name} is stale: run python helm/generate_dashboards.py"
        )


def test_dashboards_show_what_the_issue_asks_for() -> None:
    dashboards = load_dashboards()
    critic = dashboards["lecritique-critic.json"]
    expressions = [e for _, e in dashboard_expressions(critic)]
    # Explained variance per experiment, split by critic context (VF vs PVF).
    assert any("lecritique_value_explained_variance" in e for e in expressions)
    ev_panel = next(p for p in critic["panels"] if "VF vs PVF" in p.get("title", ""))
    assert (
        "{{critic_context}}" in ev_panel["targets"][0]["legendFormat"]
        and "{{experiment}}" in ev_panel["targets"][0]["legendFormat"]
    )
    assert any('bucket="all"' in e for e in expressions) and any('bucket!="all"' in e for e in expressions)
    names = set(all_dashboard_metric_names())
    required = {
        "lecritique_reward_mean",
        "lecritique_replay_depth",
        "lecritique_replay_sample_age_versions_bucket",
        "lecritique_replay_reuse_count_sum",
        "lecritique_policy_version",
        "lecritique_value_version",
        "lecritique_policy_published_version",
        "lecritique_value_published_version",
        "lecritique_dropped_stale_total",
        "lecritique_rollout_generated_tokens_total",
        "lecritique_policy_trained_tokens_total",
        "lecritique_tether_rho",
        "lecritique_value_ev",
    }
    assert required <= names
    for dashboard in dashboards.values():
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "experiment"}


def test_dashboards_use_only_lecritique_metrics() -> None:
    """A typo'd name is caught here in milliseconds; the live test checks the names are really exported."""
    for name, places in all_dashboard_metric_names().items():
        assert name.startswith("lecritique_"), (name, places)
