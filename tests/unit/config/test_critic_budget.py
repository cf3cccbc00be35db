"""``critic.updates_per_step`` against what the replay can feed: refused when it can never be met,
warned when uniform sampling can leave a step short, and the arithmetic behind both."""

from __future__ import annotations

import random

import pytest

from lecritique.config import SpecError, parse_spec
from lecritique.config.findings import warning_texts as update_budget_warnings
from lecritique.replay.budget import update_budget


def spec(k: int, **replay: int | None) -> dict:
    critic: dict = {"context": "none", "updates_per_step": k, "batch_size": replay.pop("batch_size", None)}
    critic["replay"] = {key: value for key, value in replay.items() if value is not None}
    return {
        "name": "budget",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
        "policy": {"tiny": "sudoku-mini"},
        "rollout": {"tasks_per_step": 16, "group_size": 4},
        "critic": {key: value for key, value in critic.items() if value is not None},
    }


def test_default_is_asynchronous_and_never_warned():
    parsed = parse_spec(spec(0))
    assert parsed.critic.updates_per_step == 0 and update_budget_warnings(parsed) == []


def test_the_issue_example_64_trajectories_at_max_reuse_2_feed_two_full_batch_updates():
    assert update_budget(64, 64, 2, 256).nominal == 2
    assert update_budget(64, 64, 2, 256).guaranteed == 2
    assert update_budget(64, 32, 2, 256).nominal == 4 and update_budget(64, 32, 2, 256).guaranteed == 3
    assert update_budget(64, 64, 2, 40).fresh == 40  # a push beyond capacity keeps its newest entries
    assert update_budget(8, 16, 4, 256).guaranteed == 0  # one step's data never fill a batch


def test_a_setting_that_can_never_be_met_is_refused_naming_the_fields_and_numbers():
    with pytest.raises(SpecError) as error:
        parse_spec(spec(3))  # 64 trajectories x 2 uses / 64 per update = 2
    message = str(error.value)
    for text in (
        "critic.updates_per_step = 3 cannot be met",
        "rollout.tasks_per_step x rollout.group_size = 64",
        "critic.replay.max_reuse = 2",
        "critic.batch_size = 64",
        "64 x 2 / 64 = 2 updates per step",
    ):
        assert text in message, message
    with pytest.raises(SpecError, match=r"critic.replay.capacity = 16 keeps 16\).*16 x 2 / 16 = 2 updates"):
        parse_spec(spec(3, capacity=16, batch_size=16))  # a push of 64 keeps its newest 16
    assert parse_spec(spec(2)).critic.updates_per_step == 2


def test_marginal_settings_warn_and_comfortable_ones_do_not():
    assert (
        update_budget_warnings(parse_spec(spec(2))) == []
    )  # k = max_reuse at a full-batch update: always met
    warned = update_budget_warnings(parse_spec(spec(4, batch_size=32)))
    assert len(warned) == 1 and "marginal" in warned[0] and "only 3 whatever order" in warned[0]
    assert update_budget_warnings(parse_spec(spec(4, max_reuse=4))) == []
    aged = update_budget_warnings(
        parse_spec(spec(2, max_age_versions=1))
    )  # prefetch_batches 1: ages 0..2 occur
    assert len(aged) == 1 and "critic.replay.max_age_versions = 1" in aged[0]


@pytest.mark.parametrize(
    ("fresh", "batch", "reuse"), [(64, 64, 2), (64, 32, 2), (16, 4, 4), (24, 8, 3), (10, 7, 5)]
)
def test_guaranteed_updates_happen_under_every_sampling_order(fresh, batch, reuse):
    """Uniform sampling of distinct entries, eviction at max_reuse: the guarantee always holds, and
    some orders fall short of the nominal count when the two differ."""
    budget = update_budget(fresh, batch, reuse, 1024)
    rng = random.Random(0)
    achieved = []
    for _ in range(300):
        uses = [0] * fresh
        updates = 0
        while len(live := [i for i, used in enumerate(uses) if used < reuse]) >= batch:
            for i in rng.sample(live, batch):
                uses[i] += 1
            updates += 1
        achieved.append(updates)
    assert min(achieved) >= budget.guaranteed and max(achieved) <= budget.nominal


def _counted_guaranteed(policy_batch: int, batch_size: int, max_reuse: int, capacity: int) -> int:
    """The budget's guaranteed updates counted one at a time (what ``update_budget`` did before it
    was closed form; issue #46 item 4: 1.3e11 iterations for a 638-byte spec)."""
    fresh = min(policy_batch, capacity)
    nominal = fresh * max_reuse // batch_size
    guaranteed = 0
    while guaranteed < nominal and (
        guaranteed < max_reuse or fresh - guaranteed * batch_size // max_reuse >= batch_size
    ):
        guaranteed += 1
    return 0 if fresh < batch_size else guaranteed


def test_the_closed_form_counts_what_counting_one_at_a_time_counts():
    for policy_batch in range(1, 30):
        for batch_size in range(1, 30):
            for max_reuse in range(1, 14):
                for capacity in (1, 4, 13, 64):
                    budget = update_budget(policy_batch, batch_size, max_reuse, capacity)
                    expected = _counted_guaranteed(policy_batch, batch_size, max_reuse, capacity)
                    assert budget.guaranteed == expected, (policy_batch, batch_size, max_reuse, capacity)


def test_the_largest_numbers_a_spec_allows_cost_no_counting():
    """max_reuse 10^9 at batch size 1 (the issue's 638-byte body): answered at once, exactly."""
    budget = update_budget(65_536 * 1024, 1, 1_000_000_000, 10_000_000)
    assert budget.fresh == 10_000_000
    assert budget.nominal == 10_000_000 * 1_000_000_000
    assert budget.guaranteed == budget.nominal
    parsed = parse_spec(spec(1, batch_size=1, max_reuse=1_000_000_000))
    assert parsed.critic.replay.max_reuse == 1_000_000_000
