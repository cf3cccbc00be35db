"""The alerting rules: generated file current, shipped by the chart, and each rule checked by promtool.

``promtool test rules`` (Debian's ``prometheus`` package; ``make test`` installs it) replays input
series minute by minute and compares the alerts that fire with the expected ones, labels and
annotations included. Each rule has a case that fires and cases that must not (a finished run is
not a stalled one, a new run is not stalled before the window has passed, ...).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lecritique.monitoring import promql_metric_names
from lecritique.monitoring.alerts import (
    PENDING_METRICS,
    AlertThresholds,
    alert_rules,
    render_rules_file,
    rules_document,
)
from tests.helm_support import ROOT, render_objects

RULES_FILE = ROOT / "helm" / "lecritique" / "alerts" / "lecritique-alerts.rules.yaml"
RULES = {rule.name: rule for rule in alert_rules()}


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, (
        "promtool is missing: install Debian's prometheus package (make test does: apt-get install prometheus)"
    )
    return path


def _step(experiment: str, values: str) -> dict[str, str]:
    return {
        "series": f'lecritique_orchestrator_step{{experiment="{experiment}", job="orchestrator"}}',
        "values": values,
    }


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    return {"series": name + "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def _expected(alert: str, labels: dict[str, str]) -> dict[str, Any]:
    """The alert as promtool reports it: the rule's labels added, annotation templates filled in."""
    rule = RULES[alert]

    def fill(text: str) -> str:
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)

    return {
        "exp_labels": {**labels, "severity": rule.severity},
        "exp_annotations": {"summary": fill(rule.summary), "description": fill(rule.description)},
    }


# (name, input series, [(eval time, alert, [labels of each expected alert])])
CASES: list[tuple[str, list[dict[str, str]], list[tuple[str, str, list[dict[str, str]]]]]] = [
    (
        "run stalled",
        [
            _step("exp-stuck", "1+1x10 11x30"),  # steps until 10 min, then nothing
            _step("exp-ok", "1+1x40"),
            _step("exp-done", "1+1x10 stale"),  # finished at 10 min: the orchestrator is gone
            _step(
                "exp-closing", "1+1x10 11x3 stale"
            ),  # last step at 10 min, exits at 13 min (evaluation, report)
            _step("exp-new", "_x20 1x20"),  # first step at 21 min
        ],
        [
            ("20m", "LecritiqueRunStalled", []),
            ("27m", "LecritiqueRunStalled", [{"experiment": "exp-stuck", "job": "orchestrator"}]),
        ],
    ),
    (
        "new run stalled after the window",
        [_step("exp-new", "_x20 1x30")],
        [
            ("34m", "LecritiqueRunStalled", []),
            ("38m", "LecritiqueRunStalled", [{"experiment": "exp-new", "job": "orchestrator"}]),
        ],
    ),
    (
        "stale rollouts",
        [
            _series("lecritique_dropped_stale_total", {"experiment": "exp-stale"}, "0+30x30"),
            _series(
                "lecritique_env_episodes_finished_total",
                {"experiment": "exp-stale", "environment": "sudoku", "outcome": "success"},
                "0+50x30",
            ),
            _series(
                "lecritique_env_episodes_finished_total",
                {"experiment": "exp-stale", "environment": "sudoku", "outcome": "failure"},
                "0+50x30",
            ),
            _series("lecritique_dropped_stale_total", {"experiment": "exp-fine"}, "0+1x30"),
            _series(
                "lecritique_env_episodes_finished_total",
                {"experiment": "exp-fine", "environment": "sudoku", "outcome": "success"},
                "0+100x30",
            ),
        ],
        [("20m", "LecritiqueStaleRolloutsHigh", [{"experiment": "exp-stale"}])],
    ),
    (
        "critic degraded",
        [
            _series(
                "lecritique_critic_degraded", {"experiment": "exp-a", "job": "value-evaluator"}, "0x5 1x20"
            ),
            _series("lecritique_critic_degraded", {"experiment": "exp-b", "job": "value-evaluator"}, "0x25"),
            _series(
                "lecritique_critic_degraded",
                {"experiment": "exp-c", "job": "value-evaluator"},
                "0x5 1x2 0x18",
            ),  # a blip
        ],
        [
            ("8m", "LecritiqueCriticDegraded", []),
            ("15m", "LecritiqueCriticDegraded", [{"experiment": "exp-a"}]),
        ],
    ),
    (
        "critic down",
        [
            _series("lecritique_value_updates_total", {"experiment": "exp-dead"}, "0+10x10 100x30"),
            _step("exp-dead", "1+1x40"),
            _series("lecritique_value_updates_total", {"experiment": "exp-live"}, "0+10x40"),
            _step("exp-live", "1+1x40"),
            _series("lecritique_value_updates_total", {"experiment": "exp-idle"}, "0+10x10 100x30"),
            _step("exp-idle", "1+1x10 11x30"),  # the policy stopped too: a stall, not a dead critic
        ],
        [("24m", "LecritiqueCriticDown", []), ("32m", "LecritiqueCriticDown", [{"experiment": "exp-dead"}])],
    ),
    (
        "critic evaluation failing",
        [
            _series(
                "lecritique_rpc_requests_total",
                {"experiment": "exp-x", "service": "value-evaluator", "method": "Evaluate", "code": "OK"},
                "0+10x20",
            ),
            _series(
                "lecritique_rpc_requests_total",
                {
                    "experiment": "exp-x",
                    "service": "value-evaluator",
                    "method": "Evaluate",
                    "code": "UNAVAILABLE",
                },
                "0+5x20",
            ),
            _series(
                "lecritique_rpc_requests_total",
                {"experiment": "exp-y", "service": "value-evaluator", "method": "Evaluate", "code": "OK"},
                "0+100x20",
            ),
            _series(
                "lecritique_rpc_requests_total",
                {"experiment": "exp-y", "service": "rollout", "method": "Generate", "code": "UNAVAILABLE"},
                "0+100x20",
            ),
        ],
        [("15m", "LecritiqueCriticEvaluationFailing", [{"experiment": "exp-x"}])],
    ),
    (
        "explained variance low",
        [
            _series(
                "lecritique_value_explained_variance",
                {"experiment": "exp-bad", "critic_context": "reference"},
                "-0.1x40",
            ),
            _step("exp-bad", "1+1x40"),
            _series(
                "lecritique_value_explained_variance",
                {"experiment": "exp-good", "critic_context": "none"},
                "-0.1x10 0.3x30",
            ),
            _step("exp-good", "1+1x40"),
            _series(
                "lecritique_value_explained_variance",
                {"experiment": "exp-slow", "critic_context": "none"},
                "-0.1x40",
            ),
            _step("exp-slow", "1+1x5 6x35"),  # too few steps to judge
        ],
        [
            ("10m", "LecritiqueExplainedVarianceLow", []),
            (
                "35m",
                "LecritiqueExplainedVarianceLow",
                [{"experiment": "exp-bad", "critic_context": "reference"}],
            ),
        ],
    ),
    (
        "critic far below its ceiling",
        [
            # A probe every 20 minutes (its step gauge moves), the fraction gauge holds each probe's value.
            _series(
                "lecritique_critic_ceiling_fraction",
                {"experiment": "exp-low", "critic_context": "reference"},
                "0.1x80",
            ),
            _series("lecritique_critic_probe_step", {"experiment": "exp-low"}, "5x19 10x19 15x19 20x19"),
            _series(
                "lecritique_critic_ceiling_fraction",
                {"experiment": "exp-up", "critic_context": "none"},
                "0.1x39 0.5x40",
            ),
            _series("lecritique_critic_probe_step", {"experiment": "exp-up"}, "5x19 10x19 15x19 20x19"),
            _series(
                "lecritique_critic_ceiling_fraction",
                {"experiment": "exp-once", "critic_context": "none"},
                "0.1x80",
            ),
            _series(
                "lecritique_critic_probe_step", {"experiment": "exp-once"}, "5x80"
            ),  # one probe is not a trend
        ],
        [
            ("35m", "LecritiqueCriticFarBelowCeiling", []),  # two probes so far
            (
                "45m",
                "LecritiqueCriticFarBelowCeiling",
                [{"experiment": "exp-low", "critic_context": "reference"}],
            ),
        ],
    ),
    (
        "replay saturated",
        [
            _series(
                "lecritique_replay_evictions_total", {"experiment": "exp-old", "reason": "age"}, "0+60x40"
            ),
            _series(
                "lecritique_replay_evictions_total",
                {"experiment": "exp-old", "reason": "capacity"},
                "0+40x40",
            ),
            _series("lecritique_replay_pushed_total", {"experiment": "exp-old"}, "0+100x40"),
            _series(
                "lecritique_replay_evictions_total", {"experiment": "exp-young", "reason": "age"}, "0+10x40"
            ),
            _series("lecritique_replay_pushed_total", {"experiment": "exp-young"}, "0+100x40"),
            _series(
                "lecritique_replay_reuse_count_bucket", {"experiment": "exp-old", "le": "1.0"}, "0+10x40"
            ),
            _series("lecritique_replay_reuse_count_count", {"experiment": "exp-old"}, "0+100x40"),
            _series(
                "lecritique_replay_reuse_count_bucket", {"experiment": "exp-young", "le": "1.0"}, "0+60x40"
            ),
            _series("lecritique_replay_reuse_count_count", {"experiment": "exp-young"}, "0+100x40"),
        ],
        [
            ("25m", "LecritiqueReplayAgeSaturated", [{"experiment": "exp-old"}]),
            ("25m", "LecritiqueReplayReuseSaturated", [{"experiment": "exp-old"}]),
        ],
    ),
    (
        "api 5xx",
        [
            _series(
                "lecritique_api_requests_total",
                {"method": "GET", "route": "/v1/experiments", "code": "200"},
                "0+90x30",
            ),
            _series(
                "lecritique_api_requests_total",
                {"method": "POST", "route": "/v1/experiments", "code": "503"},
                "0+10x30",
            ),
        ],
        [("20m", "LecritiqueApiErrors", [{}])],
    ),
    (
        "api healthy",
        [
            _series(
                "lecritique_api_requests_total",
                {"method": "GET", "route": "/v1/experiments", "code": "200"},
                "0+99x30",
            ),
            _series(
                "lecritique_api_requests_total",
                {"method": "GET", "route": "/v1/experiments/{experiment_id}", "code": "404"},
                "0+30x30",
            ),
            _series(
                "lecritique_api_requests_total",
                {"method": "POST", "route": "/v1/experiments", "code": "500"},
                "0+1x30",
            ),
        ],
        [("20m", "LecritiqueApiErrors", [])],
    ),
]


def promtool_tests(rules_file: Path) -> dict[str, Any]:
    tests = []
    for name, series, checks in CASES:
        tests.append(
            {
                "name": name,
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": time,
                        "alertname": alert,
                        "exp_alerts": [_expected(alert, labels) for labels in expected],
                    }
                    for time, alert, expected in checks
                ],
            }
        )
    return {"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": tests}


def test_the_committed_rules_file_equals_the_generator_output() -> None:
    assert RULES_FILE.read_text() == render_rules_file(), "run python helm/generate_alerts.py"
    spec = importlib.util.spec_from_file_location("generate_alerts", ROOT / "helm" / "generate_alerts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.RULES_FILE == RULES_FILE


def test_promtool_checks_the_rules_file() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", str(RULES_FILE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES)} rules found" in result.stdout


def test_every_rule_fires_when_it_should_and_only_then(tmp_path: Path) -> None:
    tested = {alert for _, _, checks in CASES for _, alert, _ in checks}
    assert tested == set(RULES), f"rules without a promtool case: {set(RULES) - tested}"
    test_file = tmp_path / "alerts.promtool.yaml"
    test_file.write_text(yaml.safe_dump(promtool_tests(RULES_FILE), sort_keys=False))
    result = subprocess.run(
        [promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_custom_thresholds_change_the_rules(tmp_path: Path) -> None:
    out = tmp_path / "custom.rules.yaml"
    subprocess.run(
        [
            "python3",
            str(ROOT / "helm" / "generate_alerts.py"),
            "--out",
            str(out),
            "--set",
            "stall_minutes=30",
            "--set",
            "api_5xx_fraction=0.01",
        ],
        check=True,
        capture_output=True,
    )
    rules = {rule["alert"]: rule for rule in yaml.safe_load(out.read_text())["groups"][0]["rules"]}
    assert "[30m]" in rules["LecritiqueRunStalled"]["expr"] and rules["LecritiqueApiErrors"]["expr"].endswith(
        "> 0.01"
    )
    assert (
        subprocess.run([promtool(), "check", "rules", str(out)], capture_output=True, check=False).returncode
        == 0
    )
    with pytest.raises(ValueError, match="stall_minutes"):
        AlertThresholds.model_validate({"stall_minutes": 0})


def test_the_chart_ships_the_rules_as_a_prometheus_rule(tmp_path: Path) -> None:
    rules = [
        obj
        for obj in render_objects(
            {"alerts": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}}
        )
        if obj["kind"] == "PrometheusRule"
    ]
    assert len(rules) == 1
    rule = rules[0]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["metadata"]["labels"]["app.kubernetes.io/component"] == "alerts"
    assert rule["spec"] == rules_document()
    extracted = tmp_path / "from-chart.rules.yaml"
    extracted.write_text(yaml.safe_dump(rule["spec"]))
    assert (
        subprocess.run(
            [promtool(), "check", "rules", str(extracted)], capture_output=True, check=False
        ).returncode
        == 0
    )
    assert [
        obj for obj in render_objects({"alerts": {"enabled": False}}) if obj["kind"] == "PrometheusRule"
    ] == []


def _defined_metric(name: str, defined: set[str]) -> bool:
    """``name`` (or the metric it is a series of: ``_bucket``, ``_count``, ``_sum``, ``_total``) is
    a whole metric name the sources define, not a prefix of one."""
    base = re.sub(r"_(bucket|count|sum|total)$", "", name)
    return bool({name, base, f"{base}_total"} & defined)


def test_alert_metric_names_are_dashboard_or_service_metrics() -> None:
    """Every metric a rule names is one a service defines (checked live in test_dashboard_metrics_live)."""
    sources = "\n".join(
        path.read_text() for path in [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")]
    )
    defined = set(re.findall(r'"(lecritique_\w+)"', sources))
    assert _defined_metric("lecritique_value_loss", defined)
    # A prefix of a defined name is no metric (a plain substring check accepted these).
    assert not _defined_metric("lecritique_value", defined) and not _defined_metric(
        "lecritique_value_lo", defined
    )
    for rule in alert_rules():
        for name in promql_metric_names(rule.expr):
            assert name in PENDING_METRICS or _defined_metric(name, defined), (rule.name, name)
