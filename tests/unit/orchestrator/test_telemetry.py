"""The orchestrator's Prometheus series and metrics.jsonl, without knowing any estimator's metric names."""

import ast
import json
from pathlib import Path

from prometheus_client import REGISTRY

from lecritique.advantages import estimator_gauges, get_estimator
from lecritique.orchestrator.row import StepRow
from lecritique.orchestrator.telemetry import StepLog, Telemetry

ORCHESTRATOR = Path(__file__).resolve().parents[3] / "libs" / "lecritique" / "orchestrator"


def _row(**extra):
    return StepRow(
        step=1,
        reward_mean=0.5,
        value_version=3,
        step_seconds=1.0,
        value_wait_seconds=0.0,
        policy_tokens=7,
        **extra,
    )


def test_estimator_gauges_follow_the_estimators_report():
    Telemetry("telemetry-test", "reference").step(
        _row(
            value_explained_variance=0.4,
            estimator={"tether_rho": 0.3, "tether_rho_bucket_1": 0.2, "tether_rho_fitted": 0.9},
            value_ev_buckets={0: 0.1, 2: 0.7},
        )
    )

    def sample(name, **labels):
        return REGISTRY.get_sample_value(name, {"experiment": "telemetry-test", **labels})

    assert sample("lecritique_tether_rho", bucket="all") == 0.3
    assert sample("lecritique_tether_rho", bucket="1") == 0.2
    assert sample("lecritique_value_explained_variance", critic_context="reference") == 0.4
    assert sample("lecritique_reward_mean") == 0.5 and sample("lecritique_value_version") == 3
    # The critic dashboard's per-bucket panel, for every critic estimator (not only TETHER's buckets).
    assert (
        sample("lecritique_value_ev", bucket="0") == 0.1 and sample("lecritique_value_ev", bucket="2") == 0.7
    )


def test_the_orchestrator_names_no_estimator_metric():
    """Estimator metric keys (``tether_rho``, ``evpo_uses_critic``, ...) appear nowhere in the orchestrator's code."""
    keys = set(estimator_gauges())
    for name in ("tether", "evpo"):
        keys |= set(get_estimator(name).metrics())
    for path in ORCHESTRATOR.glob("*.py"):
        strings = {
            n.value
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        assert not {s for s in strings if any(key in s for key in keys)}, path.name


def test_the_step_log_finds_steps_written_before_a_restart(tmp_path):
    sunk = []
    log = StepLog(tmp_path / "metrics.jsonl", sunk.append)
    log.append({"step": 1})
    (tmp_path / "metrics.jsonl").open("a").write("not json\n")
    assert StepLog(tmp_path / "metrics.jsonl").has_step(1) and not log.has_step(2)
    assert sunk == [{"step": 1}] and json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0]) == {
        "step": 1
    }


def test_critic_budget_and_probe_gauges():
    telemetry = Telemetry("probe-test", "reference")

    def sample(name, **labels):
        return REGISTRY.get_sample_value(name, {"experiment": "probe-test", **labels})

    telemetry.step(_row(critic_updates_done=5))
    assert sample("lecritique_critic_updates_done") == 5
    telemetry.probed(10, {})  # a skipped probe sets nothing
    assert sample("lecritique_critic_probe_step") is None
    telemetry.probed(10, {"probe_ceiling": 0.5, "probe_critic_ev": 0.2, "probe_ceiling_fraction": 0.4})
    assert sample("lecritique_critic_ceiling_fraction", critic_context="reference") == 0.4
    assert sample("lecritique_critic_probe_ceiling") == 0.5 and sample("lecritique_critic_probe_ev") == 0.2
    assert sample("lecritique_critic_probe_step") == 10
    # No positive ceiling: the fraction is undefined, NaN (which never satisfies an alert's comparison).
    telemetry.probed(20, {"probe_ceiling": -0.1, "probe_critic_ev": -0.3, "probe_ceiling_fraction": None})
    fraction = sample("lecritique_critic_ceiling_fraction", critic_context="reference")
    assert fraction != fraction and sample("lecritique_critic_probe_step") == 20
