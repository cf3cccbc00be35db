"""``critic.updates_per_step`` in a real run: every step after warm-up is scored by a critic at least
k updates newer than the previous step's, and every row says how many it got."""

from __future__ import annotations

import pytest

from tests.helm_support import quick_policy
from tests.services.conftest import pipeline_spec, run_experiment

pytestmark = pytest.mark.slow(seconds=120)


def test_four_updates_per_step_are_achieved_at_every_step(tmp_path):
    # 16 trajectories a step, 4 uses each, 8 per update: 8 updates per step on average, 5 whatever the sampling order.
    critic = {"context": "none", "warmup_updates": 2, "updates_per_step": 4, "batch_size": 8, "replay": {"max_reuse": 4}}
    spec = pipeline_spec(quick_policy(), estimator={"name": "value"}, critic=critic, orchestrator={"steps": 4})
    rows = run_experiment(spec, tmp_path)
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    assert all(row["critic_updates_per_step"] >= 4 for row in rows), [row["critic_updates_per_step"] for row in rows]
    assert all(row["critic_update_short"] is None for row in rows)
    assert all(row["critic_update_wait_seconds"] >= 0 for row in rows)


def test_the_asynchronous_default_reports_its_achieved_updates(tmp_path):
    rows = run_experiment(pipeline_spec(quick_policy(), estimator={"name": "value"}, orchestrator={"steps": 2}), tmp_path)
    assert all(isinstance(row["critic_updates_per_step"], int) and row["critic_updates_per_step"] >= 0 for row in rows)
    assert all(row["critic_update_wait_seconds"] == 0.0 for row in rows)
