"""Write the Grafana dashboards of the chart (helm/lecritique/dashboards/*.json).

Run ``python helm/generate_dashboards.py`` after editing; tests/unit/chart/test_dashboards.py checks the
committed JSON equals this script's output and that every PromQL expression names only metrics the
services export. Metrics labelled ``experiment`` are filtered by the ``$experiment`` variable; the
gRPC metrics carry no experiment label, so they are filtered by pod name (experiment pods are
named ``<experiment id>-<component>-...``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DASHBOARDS_DIR = Path(__file__).resolve().parent / "lecritique" / "dashboards"

EXP = 'experiment=~"$experiment"'
POD = 'pod=~"(${experiment:pipe})-.*"'


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(title: str, targets: list[tuple[str, str]], *, unit: str = "short", description: str = "",
           kind: str = "timeseries", width: int = 12, height: int = 8) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
        "gridPos": {"w": width, "h": height},
    }


def _row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "gridPos": {"w": 24, "h": 1}}


def _layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give panels ids and left-to-right, top-to-bottom grid positions."""
    x = y = row_height = 0
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
        width, height = panel["gridPos"]["w"], panel["gridPos"]["h"]
        if x + width > 24 or panel["type"] == "row":
            x, y = 0, y + row_height
            row_height = 0
        panel["gridPos"] = {"x": x, "y": y, "w": width, "h": height}
        x += width
        row_height = max(row_height, height)
        if panel["type"] == "row":
            x, y, row_height = 0, y + height, 0
    return panels


def _quantile(q: float, metric: str, by: str = "experiment", window: str = "$__rate_interval", selector: str = EXP) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{{{selector}}}[{window}])))"


def _dashboard(uid: str, title: str, description: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["lecritique"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {}},
                {
                    "name": "experiment",
                    "label": "Experiment",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {"query": "label_values(lecritique_orchestrator_step, experiment)", "refId": "experiments"},
                    "definition": "label_values(lecritique_orchestrator_step, experiment)",
                    "refresh": 2,
                    "multi": True,
                    "includeAll": True,
                    "allValue": ".*",
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "annotations": {"list": []},
        "panels": _layout(panels),
    }


def critic_dashboard() -> dict[str, Any]:
    return _dashboard("lecritique-critic", "lecritique / critic",
                      "Critic quality per experiment: explained variance of ordinary (VF) and privileged (PVF) critics, TETHER rho and per-bucket explained variance.", [
        _row("Critic quality"),
        _panel("Critic explained variance (VF vs PVF)", [
            (f"lecritique_value_explained_variance{{{EXP}}}", "{{experiment}} {{critic_context}}"),
        ], unit="none", description="On each policy batch, before the critic trains on it. critic_context none = VF; reference / loo_group = PVF."),
        _panel("Critic explained variance on its training batch", [
            (f"max by (experiment) (lecritique_value_train_explained_variance{{{EXP}}})", "{{experiment}}"),
        ], unit="none"),
        _panel("TETHER rho (global)", [
            (f'lecritique_tether_rho{{{EXP}, bucket="all"}}', "{{experiment}}"),
        ], unit="none", description="Weight of the critic baseline against the leave-one-out baseline.", width=8),
        _panel("TETHER rho per bucket", [
            (f'lecritique_tether_rho{{{EXP}, bucket!="all"}}', "{{experiment}} bucket {{bucket}}"),
        ], unit="none", description="Bucket m: response positions [m L/M, (m+1) L/M), L the maximum response length.", width=8),
        _panel("Critic explained variance per bucket", [
            (f"lecritique_value_ev{{{EXP}}}", "{{experiment}} bucket {{bucket}}"),
        ], unit="none", description="On each policy batch, over the tokens of each TETHER bucket: why rho differs by bucket.", width=8),
        _panel("Critic EV / Monte-Carlo ceiling (critic_probe)", [
            (f"lecritique_critic_ceiling_fraction{{{EXP}}}", "{{experiment}} {{critic_context}} EV / ceiling"),
            (f"max by (experiment) (lecritique_critic_probe_ceiling{{{EXP}}})", "{{experiment}} ceiling"),
            (f"max by (experiment) (lecritique_critic_probe_ev{{{EXP}}})", "{{experiment}} critic EV"),
        ], unit="none", description="Every critic_probe.every steps: held-out states of the current policy, Monte-Carlo "
           "continuations each. The ceiling is Var(E[R|s]) / Var(R), what a perfect critic explains; the critic's EV is "
           "MSE-based on the same continuations. Only runs with critic_probe in their spec show it.", width=24),
        _row("Critic training"),
        _panel("Critic loss", [(f"max by (experiment) (lecritique_value_loss{{{EXP}}})", "{{experiment}}")], unit="none", width=8),
        _panel("Critic updates per second", [
            (f"sum by (experiment) (rate(lecritique_value_updates_total{{{EXP}}}[$__rate_interval]))", "{{experiment}}"),
        ], unit="ops", width=8),
        _panel("Critic updates per policy step", [
            (f"max by (experiment) (lecritique_critic_updates_done{{{EXP}}})", "{{experiment}}"),
        ], unit="none", description="Updates made between the critic versions that scored consecutive policy batches "
           "(critic.updates_per_step waits for at least that many).", width=8),
        _panel("Critic hot swaps (per hour)", [
            (f"sum by (experiment) (increase(lecritique_value_evaluator_swaps_total{{{EXP}}}[1h]))", "{{experiment}}"),
        ], unit="short", width=8),
        _panel("Value versions", [
            (f"max by (experiment) (lecritique_value_published_version{{{EXP}}})", "{{experiment}} published"),
            (f"min by (experiment) (lecritique_value_evaluator_version{{{EXP}}})", "{{experiment}} served (oldest replica)"),
            (f"max by (experiment) (lecritique_value_version{{{EXP}}})", "{{experiment}} used by the last batch"),
        ], unit="none", width=24),
    ])


def training_dashboard() -> dict[str, Any]:
    return _dashboard("lecritique-training", "lecritique / training",
                      "Reward, versions, staleness and throughput of each experiment.", [
        _row("Progress"),
        _panel("Reward and held-out success", [
            (f"lecritique_reward_mean{{{EXP}}}", "{{experiment}} training batches"),
            (f"lecritique_eval_success{{{EXP}}}", "{{experiment}} held-out greedy success"),
        ], unit="none"),
        _panel("Policy step", [(f"lecritique_orchestrator_step{{{EXP}}}", "{{experiment}}")], unit="none"),
        _panel("Policy versions", [
            (f"max by (experiment) (lecritique_policy_published_version{{{EXP}}})", "{{experiment}} published"),
            (f"min by (experiment) (lecritique_rollout_policy_version{{{EXP}}})", "{{experiment}} served (oldest replica)"),
            (f"max by (experiment) (lecritique_policy_version{{{EXP}}})", "{{experiment}} in rollout (orchestrator)"),
        ], unit="none"),
        _panel("Rollouts dropped as stale (per minute)", [
            (f"sum by (experiment) (rate(lecritique_dropped_stale_total{{{EXP}}}[$__rate_interval])) * 60", "{{experiment}}"),
        ], unit="short", description="Episodes generated more than orchestrator.max_off_policy_steps versions ago."),
        _row("Throughput"),
        _panel("Tokens per second", [
            (f"sum by (experiment) (rate(lecritique_rollout_generated_tokens_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} generated (rollout)"),
            (f"sum by (experiment) (rate(lecritique_rollout_tokens_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} used by the policy loop"),
            (f"sum by (experiment) (rate(lecritique_policy_trained_tokens_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} trained"),
        ], unit="short"),
        _panel("Episodes per second", [
            (f"sum by (experiment, outcome) (rate(lecritique_env_episodes_finished_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} {{outcome}}"),
            (f"sum by (experiment) (rate(lecritique_env_verifications_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} verifications"),
        ], unit="short"),
        _panel("Policy steps per minute", [
            (f"sum by (experiment) (rate(lecritique_policy_updates_total{{{EXP}}}[$__rate_interval])) * 60", "{{experiment}}"),
        ], unit="short", width=8),
        _panel("Policy step time", [
            (_quantile(0.5, "lecritique_policy_step_seconds"), "{{experiment}} p50"),
            (_quantile(0.95, "lecritique_policy_step_seconds"), "{{experiment}} p95"),
        ], unit="s", width=8),
        _panel("Share of step time waiting on the critic", [
            (f"sum by (experiment) (rate(lecritique_value_wait_seconds_total{{{EXP}}}[$__rate_interval]))", "{{experiment}}"),
        ], unit="percentunit", width=8),
        _row("Policy optimisation"),
        _panel("Policy loss", [(f"max by (experiment) (lecritique_policy_loss{{{EXP}}})", "{{experiment}}")], unit="none", width=8),
        _panel("Policy update time", [
            (_quantile(0.5, "lecritique_policy_train_seconds"), "{{experiment}} p50"),
            (_quantile(0.95, "lecritique_policy_train_seconds"), "{{experiment}} p95"),
        ], unit="s", width=8),
        _panel("Rollout request time", [
            (_quantile(0.5, "lecritique_rollout_generate_seconds"), "{{experiment}} p50"),
            (_quantile(0.95, "lecritique_rollout_generate_seconds"), "{{experiment}} p95"),
        ], unit="s", width=8),
    ])


def replay_dashboard() -> dict[str, Any]:
    return _dashboard("lecritique-replay", "lecritique / replay",
                      "The critic's replay buffer: depth, age of sampled trajectories (in policy versions), reuse, evictions.", [
        _panel("Replay depth", [(f"max by (experiment) (lecritique_replay_depth{{{EXP}}})", "{{experiment}}")], unit="short"),
        _panel("Pushed and sampled per second", [
            (f"sum by (experiment) (rate(lecritique_replay_pushed_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} pushed"),
            (f"sum by (experiment) (rate(lecritique_replay_sampled_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} sampled"),
        ], unit="short"),
        _panel("Age of sampled trajectories (policy versions)", [
            (f"sum by (experiment) (rate(lecritique_replay_sample_age_versions_sum{{{EXP}}}[$__rate_interval]))"
             f" / sum by (experiment) (rate(lecritique_replay_sample_age_versions_count{{{EXP}}}[$__rate_interval]))", "{{experiment}} mean"),
            (_quantile(0.95, "lecritique_replay_sample_age_versions"), "{{experiment}} p95"),
        ], unit="none"),
        _panel("Reuse", [
            (f"sum by (experiment) (rate(lecritique_replay_reuse_count_sum{{{EXP}}}[$__rate_interval]))"
             f" / sum by (experiment) (rate(lecritique_replay_reuse_count_count{{{EXP}}}[$__rate_interval]))", "{{experiment}} mean use number of samples"),
            (f"sum by (experiment) (rate(lecritique_replay_uses_at_eviction_sum{{{EXP}}}[$__rate_interval]))"
             f" / sum by (experiment) (rate(lecritique_replay_uses_at_eviction_count{{{EXP}}}[$__rate_interval]))", "{{experiment}} mean uses at eviction"),
        ], unit="none"),
        _panel("Evictions per second by reason", [
            (f"sum by (experiment, reason) (rate(lecritique_replay_evictions_total{{{EXP}}}[$__rate_interval]))", "{{experiment}} {{reason}}"),
        ], unit="short"),
        _panel("Replay operation time (p95)", [
            (_quantile(0.95, "lecritique_replay_operation_seconds", by="experiment, operation"), "{{experiment}} {{operation}}"),
        ], unit="s"),
    ])


def services_dashboard() -> dict[str, Any]:
    return _dashboard("lecritique-services", "lecritique / services",
                      "gRPC traffic and latency of every service, and each service's own work time.", [
        _panel("gRPC requests per second", [
            (f"sum by (service, method, code) (rate(lecritique_rpc_requests_total{{{EXP}}}[$__rate_interval]))", "{{service}}.{{method}} {{code}}"),
        ], unit="reqps"),
        _panel("gRPC latency (p95)", [
            (_quantile(0.95, "lecritique_rpc_latency_seconds", by="service, method", selector=EXP), "{{service}}.{{method}}"),
        ], unit="s"),
        _panel("Environment step time (p95)", [
            (_quantile(0.95, "lecritique_env_step_seconds", by="experiment, environment"), "{{experiment}} {{environment}}"),
        ], unit="s", width=8),
        _panel("Critic evaluation time (p95)", [
            (_quantile(0.95, "lecritique_value_evaluate_seconds"), "{{experiment}}"),
        ], unit="s", width=8),
        _panel("Trajectories evaluated per second", [
            (f"sum by (experiment) (rate(lecritique_value_evaluated_trajectories_total{{{EXP}}}[$__rate_interval]))", "{{experiment}}"),
        ], unit="short", width=8),
    ])


DASHBOARDS = {
    "lecritique-critic.json": critic_dashboard,
    "lecritique-training.json": training_dashboard,
    "lecritique-replay.json": replay_dashboard,
    "lecritique-services.json": services_dashboard,
}


def render_all() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: json.dumps(build(), indent=2, sort_keys=False) + "\n" for name, build in DASHBOARDS.items()}


def main() -> None:
    DASHBOARDS_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (DASHBOARDS_DIR / name).write_text(text)
        print(f"wrote {DASHBOARDS_DIR / name}")


if __name__ == "__main__":
    main()
