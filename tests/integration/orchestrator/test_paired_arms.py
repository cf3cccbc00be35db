"""Paired arms (issue 39): two runs of the same seed draw the same tasks and sampling seeds at every
policy step, whatever estimator they use; a critic's warm-up draws from a stream of its own.

Real services (:mod:`tests.integration.services.conftest`), the quick tiny policy, one policy step per arm.
"""

from __future__ import annotations

import pytest

from tests.integration.services.conftest import pipeline_spec, run_experiment
from tests.tiny_policies import quick_policy

pytestmark = pytest.mark.slow(seconds=120)

DRAW = ("batch_cursor", "task_seed", "sampling_seed", "tasks_digest")
"""What a step's row says of the batch it drew."""


def test_mean_and_a_warmed_up_critic_arm_of_one_seed_see_the_same_first_batch(tmp_path):
    common = {"seed": 3, "orchestrator": {"steps": 1}}
    mean = run_experiment(
        pipeline_spec(quick_policy(), estimator={"name": "mean"}, critic=None, **common), tmp_path / "mean"
    )
    # Four warm-up updates on 16 trajectories a step, critic batch 8: the warm-up consumes batches.
    # critic.warmup blocking: TETHER would otherwise step at rho = 0 while the critic warms (no warm-up batches).
    critic = {
        "context": "reference",
        "warmup_updates": 4,
        "warmup": "blocking",
        "batch_size": 8,
        "replay": {"max_reuse": 1},
    }
    tether = run_experiment(
        pipeline_spec(quick_policy(), estimator={"name": "tether"}, critic=critic, **common),
        tmp_path / "tether",
    )
    assert mean[0]["batch_cursor"] == tether[0]["batch_cursor"] == 0, (mean[0], tether[0])
    assert [mean[0][key] for key in DRAW] == [tether[0][key] for key in DRAW], (mean[0], tether[0])
    assert tether[0]["warmup_batches"] >= 1 and mean[0]["warmup_batches"] == 0, tether[0]
