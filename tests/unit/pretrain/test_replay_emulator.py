"""The replay's rules as ``lecritique critic sweep`` emulates them (issue 45 item 3): distinct rows per
update, at most ``max_reuse`` uses, pushes only when needed or at a run's measured pace."""

from __future__ import annotations

import numpy as np
import pytest

from lecritique.pretrain.replay_emulator import ReplayEmulator


@pytest.mark.parametrize(("fresh", "max_reuse", "batch"), [(64, 2, 64), (64, 2, 32), (16, 4, 8), (64, 1, 64)])
def test_the_emulated_replay_samples_distinct_rows_at_most_max_reuse_times(fresh, max_reuse, batch):
    rows = 64 * 12
    replay = ReplayEmulator(rows, fresh, 256, max_reuse, batch, np.random.default_rng(3))
    uses = np.zeros(rows, dtype=int)
    updates = 0
    while replay.passes == 1:
        taken = replay.sample()
        assert len(set(taken)) == batch
        np.add.at(uses, taken, 1)
        updates += 1
        assert len(replay.buffer) <= 256
        if replay.passes == 1:
            assert uses.max() <= max_reuse
    # Pushed only when needed: a first pass feeds close to rows x max_reuse / batch updates.
    assert updates >= 0.75 * rows * max_reuse / batch


def test_the_emulated_replay_refuses_a_batch_it_can_never_hold():
    with pytest.raises(ValueError, match="batch_size: 300 distinct rows"):
        ReplayEmulator(1000, 64, 256, 2, 300, np.random.default_rng(0))


def test_a_replay_fed_at_the_runs_pace_pushes_a_policy_batch_every_so_many_updates():
    # A critic making 1.25 updates a policy step: 80 pushes feed 100 updates, and rows the critic
    # has no time for leave the replay by its capacity, unused, as in the run.
    replay = ReplayEmulator(64 * 200, 64, 256, 2, 64, np.random.default_rng(1), updates_per_push=1.25)
    uses = np.zeros(64 * 200, dtype=int)
    for _ in range(100):
        np.add.at(uses, replay.sample(), 1)
    assert replay.pushes == 80 and uses.max() <= 2
    pushed = uses[replay.order[: replay.cursor]]
    assert (pushed == 0).sum() > 0 and 100 * 64 / replay.cursor == pytest.approx(1.25, rel=0.01)
