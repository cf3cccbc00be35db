"""The critic's knobs in real runs: ``critic.updates_per_step`` (every step after warm-up is scored by a
critic at least k updates newer than the previous step's, and every row says how many it got) and
``critic.tiny`` (a critic of four times the policy's parameters trains and is served, and the
critic probe scores it through the real services)."""

from __future__ import annotations

import pytest

from lecritique.models.critic import critic_from_policy, load_critic
from lecritique.weights import WeightStore
from tests.integration.services.conftest import pipeline_spec, run_experiment
from tests.tiny_policies import quick_policy

pytestmark = pytest.mark.slow(seconds=120)


def test_four_updates_per_step_are_achieved_at_every_step(tmp_path):
    # 16 trajectories a step, 4 uses each, 8 per update: 8 updates per step on average, 5 whatever the sampling order.
    critic = {
        "context": "none",
        "warmup_updates": 2,
        "updates_per_step": 4,
        "batch_size": 8,
        "replay": {"max_reuse": 4},
    }
    spec = pipeline_spec(
        quick_policy(), estimator={"name": "value"}, critic=critic, orchestrator={"steps": 4}
    )
    rows = run_experiment(spec, tmp_path)
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    assert all(row["critic_updates_done"] >= 4 for row in rows), [row["critic_updates_done"] for row in rows]
    assert all(row["critic_update_short"] is None for row in rows)
    assert all(row["critic_update_wait_seconds"] >= 0 for row in rows)


def test_a_critic_of_four_times_the_parameters_trains_asynchronously(tmp_path):
    critic = {"context": "none", "warmup_updates": 2, "tiny": {"layers": 8}}  # the policy has 2 layers
    spec = pipeline_spec(quick_policy(), estimator={"name": "value"}, critic=critic)
    spec["critic_probe"] = {
        "every": 2,
        "states": 4,
        "continuations": 2,
    }  # the probe through the real services too
    rows = run_experiment(spec, tmp_path)
    assert [row["step"] for row in rows] == [1, 2]
    assert (
        "probe_states" not in rows[0] and rows[1]["probe_states"] == 4 and rows[1]["probe_continuations"] == 2
    )
    assert rows[1]["probe_value_version"] >= 2 and rows[1]["probe_seconds"] > 0
    # The asynchronous default reports what it achieved and never waits for updates.
    assert all(
        isinstance(row["critic_updates_done"], int) and row["critic_updates_done"] >= 0 for row in rows
    )
    # Only the first policy batch may wait, for the warmed-up critic (paired arms, issue 39); the
    # asynchronous critic never holds a later step.
    assert rows[0]["critic_update_wait_seconds"] >= 0.0
    assert all(row["critic_update_wait_seconds"] == 0.0 for row in rows[1:])
    assert all(
        row["value_version"] >= 2 for row in rows
    )  # warmed up: versions of the deep critic were served
    store = WeightStore(tmp_path / "weights")
    served = load_critic(store.latest("critic")[1])
    policy = critic_from_policy(store.latest("policy")[1])  # the critic of the policy's own shape
    assert served.config.num_hidden_layers == 8
    assert sum(p.numel() for p in served.parameters()) > 3.5 * sum(p.numel() for p in policy.parameters())
