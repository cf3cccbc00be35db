"""The oracle ceiling: how much return variance any critic could explain on a set of states.

Its arithmetic (:func:`variance_terms`, :func:`ceiling_of`, :func:`critic_ev`, :func:`probe_summary`)
is shared by critic-eval's per-position table (:func:`ceiling_rows`) and the orchestrator's in-run
critic probe (``critic_probe``); this module imports numpy only (the orchestrator has no torch).

States s are drawn from the policy's own episodes; each has K >= 2 Monte-Carlo continuations
R_s1..R_sK (returns of the fixed policy from s). With m_s the mean and v_s the sample variance
(ddof 1) of state s's continuations, over n states:

- within  = mean_s v_s                          unbiased for E_s[Var(R | s)]
- between = var_s(m_s) (ddof 1) - within / K    unbiased for Var_s(E[R | s]); ``within / K`` is
  the Monte-Carlo noise the sample means carry (reported as ``mc_noise``)
- total   = between + within                    unbiased for Var(R)
- ceiling = between / total                     the EV of the perfect critic V(s) = E[R | s]
  (a ratio of unbiased estimates; its standard error is a bootstrap over *episodes*: the states
  of one episode share its prefix and are correlated, so resampling states one by one would
  understate it)

A critic V is scored on the same continuations: ``ev_mse`` = 1 - mean_{s,k} (R_sk - V(s))^2 / total,
whose numerator is unbiased for E[(R - V(s))^2]; the perfect critic scores ``ceiling`` in
expectation, so ``ev_mse / ceiling`` is the fraction of the achievable EV the critic reaches. It
is MSE-based (a biased critic pays for its bias), unlike the in-run ``ev_var`` = 1 - Var(R - V) /
Var(R) of the training batches, which forgives a constant offset: the two are different numbers.

The ratio is given only where the ceiling is clearly above 0: a bucket whose interval
(ceiling ± 1.96 s.e.) reaches ``MIN_CEILING`` has none (``n/a (ceiling too small)``), since a
small error over a near-zero ceiling is an arbitrarily large ratio. Every n/a carries its reason
(``*_note``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MIN_CEILING = 0.05
"""A bucket's ceiling interval must lie above this for a critic's EV / ceiling to be given."""
Z95 = 1.96
"""Normal 97.5% quantile: the ceiling's interval is ceiling ± Z95 x bootstrap s.e."""
CEILING_TOO_SMALL = "ceiling too small"
CONSTANT_RETURNS = "every return is the same (Var(R) = 0: e.g. the policy always fails here)"
TOO_FEW_STATES = "fewer than 2 states"


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


def bucket_labels(edges: Sequence[int], prefix: str = "") -> list[str]:
    """Names of the position buckets cut at ``edges``: [1, 3] -> t=0, t=1-2, t>=3."""
    bounds = [0, *edges]
    labels = []
    for low, high in zip(bounds, [*edges, None], strict=True):
        if high is None:
            labels.append(f"{prefix}t>={low}")
        elif high - low == 1:
            labels.append(f"{prefix}t={low}")
        else:
            labels.append(f"{prefix}t={low}-{high - 1}")
    return labels


def episode_bootstrap_se(
    rewards: np.ndarray, episodes: np.ndarray, samples: int, rng: np.random.Generator
) -> float:
    """Bootstrap s.e. of the ceiling resampling whole episodes (all their states at once); NaN
    when fewer than two episodes or no resample has a defined ceiling."""
    groups = [np.flatnonzero(episodes == e) for e in np.unique(episodes)]
    if len(groups) < 2:
        return float("nan")
    resampled = []
    for _ in range(samples):
        chosen = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        if chosen.size >= 2:
            resampled.append(ceiling_of(rewards[chosen]))
    finite = np.array([x for x in resampled if np.isfinite(x)])
    return float(finite.std()) if finite.size >= 2 else float("nan")


def _bucket_row(
    label: str,
    axis: str,
    rewards: np.ndarray,
    episodes: np.ndarray,
    critics: Mapping[str, np.ndarray],
    bootstrap: int,
    rng: np.random.Generator,
) -> dict[str, Any]:
    n = rewards.shape[0]
    nan = float("nan")
    row: dict[str, Any] = {
        "label": label,
        "axis": axis,
        "states": n,
        "episodes": int(np.unique(episodes).size),
    }
    if n < 2:
        note = TOO_FEW_STATES
        return {
            **row,
            "ceiling": nan,
            "ceiling_se": nan,
            "mc_noise": nan,
            "ceiling_note": note,
            "critics": {
                name: {"ev_mse": nan, "fraction": nan, "ev_note": note, "fraction_note": note}
                for name in critics
            },
        }
    between, within, total = variance_terms(rewards)
    ceiling = between / total if total > 0 else nan
    se = episode_bootstrap_se(rewards, episodes, bootstrap, rng) if total > 0 else nan
    low, high = ceiling - Z95 * se, ceiling + Z95 * se
    row.update(
        ceiling=ceiling,
        ceiling_se=se,
        ceiling_low=low,
        ceiling_high=high,
        mc_noise=within / rewards.shape[1],
        return_variance=total,
        between=between,
        within=within,
        se_resampled_by="episode",
    )
    if total <= 0:
        row["ceiling_note"] = CONSTANT_RETURNS
    elif not np.isfinite(se):
        row["ceiling_note"] = "one episode: no interval"
    clear = bool(np.isfinite(low) and low > MIN_CEILING)
    row["critics"] = {}
    for name, values in critics.items():
        ev = critic_ev(rewards, values)
        cell: dict[str, Any] = {"ev_mse": ev, "fraction": ev / ceiling if clear else nan}
        if total <= 0:
            cell["ev_note"] = cell["fraction_note"] = CONSTANT_RETURNS
        elif not clear:
            cell["fraction_note"] = CEILING_TOO_SMALL
        row["critics"][name] = cell
    return row


def ceiling_rows(
    rewards: np.ndarray,
    positions: np.ndarray,
    critics: Mapping[str, np.ndarray],
    edges: Sequence[int],
    *,
    episodes: np.ndarray | None = None,
    turn_positions: np.ndarray | None = None,
    bootstrap: int = 500,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per position bucket (and ``all``): states, ceiling ± bootstrap s.e. (by episode),
    MC noise, and per critic its ``ev_mse`` and EV / ceiling (or the reason there is none).

    ``rewards`` [n, K]; ``positions`` [n]: response tokens of the episode before the state (0 =
    before its first policy token); ``episodes`` [n]: the episode each state was cut from (None:
    every state its own); ``turn_positions`` [n]: policy tokens of the state's own turn before it;
    where they differ from ``positions`` (a multi-turn task) rows per turn position follow, with
    ``axis: turn``. ``critics[name]`` [n]."""
    positions = np.asarray(positions)
    episodes = np.arange(len(positions)) if episodes is None else np.asarray(episodes)
    rng = np.random.default_rng(seed)
    groups = [("all", "episode", np.ones(len(positions), dtype=bool))]
    which = np.searchsorted(np.asarray(edges), positions, side="right")
    groups += [(label, "episode", which == b) for b, label in enumerate(bucket_labels(edges))]
    if turn_positions is not None and not np.array_equal(np.asarray(turn_positions), positions):
        by_turn = np.searchsorted(np.asarray(edges), np.asarray(turn_positions), side="right")
        groups += [(label, "turn", by_turn == b) for b, label in enumerate(bucket_labels(edges, "turn "))]
    return [
        _bucket_row(
            label,
            axis,
            rewards[mask],
            episodes[mask],
            {k: np.asarray(v)[mask] for k, v in critics.items()},
            bootstrap,
            rng,
        )
        for label, axis, mask in groups
    ]


def best_critic(row: Mapping[str, Any]) -> str:
    """The verdict on one ceiling row: the critic with the largest EV / ceiling, the ceiling with
    its s.e., and the others' fractions; or why there is no ranking."""
    ceiling = row.get("ceiling", float("nan"))
    fractions = {name: cell.get("fraction", float("nan")) for name, cell in row.get("critics", {}).items()}
    ranked = sorted(((f, n) for n, f in fractions.items() if np.isfinite(f)), reverse=True)
    if not ranked:
        notes = {cell.get("fraction_note") for cell in row.get("critics", {}).values()} - {None}
        return f"no verdict: {'; '.join(sorted(notes)) or 'no critic scored'}"
    best_fraction, best = ranked[0]
    se = row.get("ceiling_se", float("nan"))
    interval = (
        f"ceiling {ceiling:.2f} ± {se:.2f} s.e." if np.isfinite(se) else f"ceiling {ceiling:.2f}, no interval"
    )
    others = "; ".join(f"{name} {fraction:.2f}" for fraction, name in ranked[1:])
    tie = any(abs(f - best_fraction) < 1e-9 for f, _ in ranked[1:])
    # One critic measured is no contest: named, never "best".
    head = "tie" if tie else f"best: {best}" if others else best
    return f"{head}, {best_fraction:.2f} of the ceiling ({interval})" + (f"; {others}" if others else "")
