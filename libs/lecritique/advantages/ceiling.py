"""The oracle ceiling's arithmetic: how much return variance any critic could explain on a set of states.

Shared by ``critic-eval`` (:mod:`lecritique.critic_eval.ceiling`, per position bucket) and the
orchestrator's in-run critic probe (``critic_probe``). States s each have K >= 2 Monte-Carlo
continuations R_s1..R_sK (returns of the fixed policy from s). With m_s the mean and v_s the sample
variance (ddof 1) of state s's continuations, over n states:

- within  = mean_s v_s                          unbiased for E_s[Var(R | s)]
- between = var_s(m_s) (ddof 1) - within / K    unbiased for Var_s(E[R | s])
- total   = between + within                    unbiased for Var(R)
- ceiling = between / total                     the EV of the perfect critic V(s) = E[R | s]

A critic V is scored on the same continuations: EV = 1 - mean_{s,k} (R_sk - V(s))^2 / total (an
MSE-based EV, not the in-run variance-based one), whose numerator is unbiased for E[(R - V(s))^2];
the perfect critic scores ``ceiling`` in expectation.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def variance_terms(rewards: np.ndarray) -> tuple[float, float, float]:
    """(between, within, total) of a [states, K] reward array, as in the module docstring."""
    k = rewards.shape[1]
    within = float(rewards.var(axis=1, ddof=1).mean())
    between = float(rewards.mean(axis=1).var(ddof=1)) - within / k
    return between, within, between + within


def ceiling_of(rewards: np.ndarray) -> float:
    between, _, total = variance_terms(rewards)
    return between / total if total > 0 else float("nan")


def critic_ev(rewards: np.ndarray, values: np.ndarray) -> float:
    """``ev_mse`` of per-state values against every continuation's return (the module docstring's EV)."""
    _, _, total = variance_terms(rewards)
    if total <= 0:
        return float("nan")
    return 1.0 - float(((rewards - values[:, None]) ** 2).mean()) / total


def probe_summary(
    rewards: np.ndarray, values: np.ndarray, *, bootstrap: int = 200, seed: int = 0
) -> dict[str, Any]:
    """Ceiling, critic EV and their ratio on ``rewards`` [n, K] with ``values`` [n], each with a
    bootstrap standard error over states (one state per episode, so states are independent).

    The ratio is None when the ceiling is not positive (no state-determined variance to reach)."""
    ceiling, ev = ceiling_of(rewards), critic_ev(rewards, values)
    rng = np.random.default_rng(seed)
    n = rewards.shape[0]
    draws = [rng.integers(0, n, n) for _ in range(bootstrap)]
    ceilings = np.array([ceiling_of(rewards[d]) for d in draws])
    evs = np.array([critic_ev(rewards[d], values[d]) for d in draws])
    fraction = ev / ceiling if ceiling > 0 else None
    return {
        "ceiling": ceiling,
        "ceiling_se": float(np.nanstd(ceilings)),
        "critic_ev": ev,
        "critic_ev_se": float(np.nanstd(evs)),
        "fraction": fraction,
    }
