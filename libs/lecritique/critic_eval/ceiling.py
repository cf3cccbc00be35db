"""The oracle ceiling: how much return variance any critic could explain on a set of states.

States s are drawn from the policy's own episodes; each has K >= 2 Monte-Carlo continuations
R_s1..R_sK (returns of the fixed policy from s). With m_s the mean and v_s the sample variance
(ddof 1) of state s's continuations, over n states:

- within  = mean_s v_s                          unbiased for E_s[Var(R | s)]
- between = var_s(m_s) (ddof 1) - within / K    unbiased for Var_s(E[R | s]); ``within / K`` is
  the Monte-Carlo noise the sample means carry (reported as ``mc_noise``)
- total   = between + within                    unbiased for Var(R)
- ceiling = between / total                     the EV of the perfect critic V(s) = E[R | s]
  (a ratio of unbiased estimates; its standard error is a bootstrap over states)

A critic V is scored on the same continuations: EV = 1 - mean_{s,k} (R_sk - V(s))^2 / total,
whose numerator is unbiased for E[(R - V(s))^2]; the perfect critic scores ``ceiling`` in
expectation, so ``critic_ev / ceiling`` is the fraction of the achievable EV the critic reaches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# The arithmetic is shared with the orchestrator's in-run critic probe (moved, unchanged).
from lecritique.advantages.ceiling import ceiling_of, critic_ev, variance_terms

__all__ = ["bucket_labels", "ceiling_of", "ceiling_rows", "critic_ev", "variance_terms"]


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """Names of the position buckets cut at ``edges``: [1, 3] -> t=0, t=1-2, t>=3."""
    bounds = [0, *edges]
    labels = []
    for low, high in zip(bounds, [*edges, None], strict=True):
        if high is None:
            labels.append(f"t>={low}")
        elif high - low == 1:
            labels.append(f"t={low}")
        else:
            labels.append(f"t={low}-{high - 1}")
    return labels


def ceiling_rows(
    rewards: np.ndarray, positions: np.ndarray, critics: Mapping[str, np.ndarray], edges: Sequence[int],
    *, bootstrap: int = 500, seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per position bucket (and ``all``): states, ceiling ± bootstrap s.e., MC noise, and
    per critic its EV and EV / ceiling. ``rewards`` [n, K], ``positions`` [n] (response position
    of each state: 0 = before the first response token), ``critics[name]`` [n]."""
    which = np.searchsorted(np.asarray(edges), positions, side="right")
    groups = [("all", np.ones(len(positions), dtype=bool))]
    groups += [(label, which == b) for b, label in enumerate(bucket_labels(edges))]
    rng = np.random.default_rng(seed)
    rows = []
    for label, mask in groups:
        n = int(mask.sum())
        row: dict[str, Any] = {"label": label, "states": n}
        if n < 2:
            rows.append({**row, "ceiling": float("nan"), "ceiling_se": float("nan"), "mc_noise": float("nan"), "critics": {}})
            continue
        chosen = rewards[mask]
        between, within, total = variance_terms(chosen)
        resampled = [ceiling_of(chosen[rng.integers(0, n, n)]) for _ in range(bootstrap)]
        ceiling = between / total if total > 0 else float("nan")
        row.update(
            ceiling=ceiling, ceiling_se=float(np.nanstd(resampled)), mc_noise=within / chosen.shape[1],
            return_variance=total, between=between, within=within,
        )
        row["critics"] = {
            name: {"ev": (ev := critic_ev(chosen, values[mask])), "fraction": ev / ceiling if ceiling > 0 else float("nan")}
            for name, values in critics.items()
        }
        rows.append(row)
    return rows
