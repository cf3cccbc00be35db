"""How many critic updates one policy step's fresh trajectories can feed (``critic.updates_per_step``).

A step pushes ``fresh`` new trajectories (the policy batch, at most the replay's capacity). Each
can be sampled ``max_reuse`` times, and one critic update takes ``batch_size`` *distinct*
entries, so the fresh data of one step hold ``fresh * max_reuse / batch_size`` updates at most
(:attr:`UpdateBudget.nominal`): asking for more every step can never be met on average.

Sampling is uniform over the buffer, not by remaining uses, so some entries run out before others
and a buffer may hold unused uses on fewer than ``batch_size`` entries, which no update can take
until the next push. :attr:`UpdateBudget.guaranteed` is how many updates the fresh data feed
whatever the sampling order: no entry is exhausted before ``max_reuse`` updates, and after ``j``
updates at most ``j * batch_size // max_reuse`` are, so update ``j + 1`` has its ``batch_size``
distinct entries while ``j < max_reuse`` or ``fresh - j * batch_size // max_reuse >= batch_size``.
Between the two a setting is met on average (leftover uses carry over to the next step) but not
on every step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpdateBudget:
    """Critic updates the fresh data of one policy step can feed."""

    fresh: int
    """Trajectories one step adds to the buffer (the policy batch, capped by the capacity)."""
    nominal: int
    """``fresh * max_reuse // batch_size``: the most updates per step sustainable on average."""
    guaranteed: int
    """Updates the fresh data feed on every step, whatever order uniform sampling takes them in."""


def update_budget(policy_batch: int, batch_size: int, max_reuse: int, capacity: int) -> UpdateBudget:
    """The budget of one step (see the module docstring); all arguments are counts >= 1."""
    for name, value in (
        ("policy_batch", policy_batch),
        ("batch_size", batch_size),
        ("max_reuse", max_reuse),
        ("capacity", capacity),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    fresh = min(policy_batch, capacity)
    nominal = fresh * max_reuse // batch_size
    if fresh < batch_size:
        return UpdateBudget(fresh, nominal, 0)
    # The condition above holds for every j < max_reuse and, beyond, while
    # j * batch_size // max_reuse <= fresh - batch_size: it first fails at the smallest j >= max_reuse
    # with j * batch_size >= (fresh - batch_size + 1) * max_reuse. Closed form, so that a spec's numbers
    # (max_reuse up to 10^9) cost constant time where the API validates them.
    first_short = max(max_reuse, -(-(fresh - batch_size + 1) * max_reuse // batch_size))
    return UpdateBudget(fresh, nominal, min(nominal, first_short))
