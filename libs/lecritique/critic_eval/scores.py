"""One critic's row of the critic-eval table, and the reason behind every n/a in it.

- ``value_mse``: mean (V(s) - m_s)^2 against the Monte-Carlo values m_s;
- ``ev_var``: 1 - Var(m - V) / Var(m) against the Monte-Carlo values (variance-based, like the
  in-run EV of the training batches: a constant offset costs nothing). The ceiling table's
  ``ev_mse`` (:mod:`.ceiling`) is a different quantity, against every continuation's return;
- ``bias``, ``correlation``, ``spread``: why ``value_mse`` is what it is. With mean error b =
  mean(V - m), Pearson correlation r of V and m and standard deviations s_V, s_m,
  ``value_mse = b^2 + (s_V - r s_m)^2 + (1 - r^2) s_m^2``: a critic that lags the policy pays b^2,
  one that ranks states well but with the wrong scale pays the middle term, and r^2 is the most
  of Var(m) any rescaling of its values could explain; ``spread`` is s_V / s_m;
- ``top1_k{k}``: over the ranking probes whose Monte-Carlo values have a single best candidate
  among the first k (probes tied at the top name no best and are left out, counted in
  ``mc_ties_k{k}``), the share where the critic's single highest score is that candidate; a critic
  that ties at the top has not chosen, a miss, counted in ``critic_ties_k{k}``. Kept in
  ``critic_eval.json``; the tables show ``pairs_k{k}`` instead, since with binary returns most
  probes tie at the top and top-1 reads 0 or n/a almost everywhere;
- ``pairs_k{k}``: pairwise ranking accuracy over untied pairs. Over every pair of the first k
  candidates of every probe whose Monte-Carlo values differ (``untied_pairs_k{k}`` of them; pairs
  the Monte-Carlo values tie say nothing about ranking and are left out), the share the critic
  orders as they do, a pair the critic values alike counting one half
  (``critic_tied_pairs_k{k}``). That is Kendall's concordance with ties handled as in the AUC:
  0.5 is chance, and a critic-free baseline, which values every candidate of a probe alike, scores
  exactly 0.5; 1.0 orders every untied pair right.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lecritique.advantages import explained_variance, value_mse


def ranking_counts(guess: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """``top1`` (NaN when no probe has a single best), ``decided``, ``mc_ties``, ``critic_ties`` of [N, k] arrays."""
    if guess.shape[0] == 0:
        return {"top1": float("nan"), "decided": 0.0, "mc_ties": 0.0, "critic_ties": 0.0}
    unique_best = (truth == truth.max(axis=1, keepdims=True)).sum(axis=1) == 1
    critic_tie = (guess == guess.max(axis=1, keepdims=True)).sum(axis=1) > 1
    hits = unique_best & ~critic_tie & (np.argmax(guess, axis=1) == np.argmax(truth, axis=1))
    decided = int(unique_best.sum())
    return {
        "top1": float(hits.sum() / decided) if decided else float("nan"),
        "decided": float(decided),
        "mc_ties": float((~unique_best).sum()),
        "critic_ties": float((critic_tie & unique_best).sum()),
    }


def pairwise_counts(guess: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """``pairs`` (NaN without an untied pair), ``untied_pairs``, ``critic_tied_pairs`` of [N, k] arrays."""
    k = guess.shape[1] if guess.ndim == 2 else 0
    first, second = np.triu_indices(k, 1)
    truth_sign = np.sign(truth[:, first] - truth[:, second])
    guess_sign = np.sign(guess[:, first] - guess[:, second])
    untied = truth_sign != 0
    agree = (guess_sign == truth_sign) & untied
    critic_tied = (guess_sign == 0) & untied
    count = int(untied.sum())
    return {
        "pairs": float((agree.sum() + 0.5 * critic_tied.sum()) / count) if count else float("nan"),
        "untied_pairs": float(count),
        "critic_tied_pairs": float(critic_tied.sum()),
    }


def fit_decomposition(predicted: np.ndarray, mc_values: np.ndarray) -> dict[str, float]:
    """``bias``, ``correlation`` and ``spread`` of the module docstring (NaN where undefined: no
    states, or V or m constant, which leaves no correlation to measure)."""
    nan = float("nan")
    if predicted.size == 0:
        return {"bias": nan, "correlation": nan, "spread": nan}
    bias = float(np.mean(predicted - mc_values))
    sd_v, sd_m = float(np.std(predicted)), float(np.std(mc_values))
    if sd_v == 0.0 or sd_m == 0.0:
        return {"bias": bias, "correlation": nan, "spread": sd_v / sd_m if sd_m else nan}
    correlation = float(
        np.mean((predicted - predicted.mean()) * (mc_values - mc_values.mean())) / (sd_v * sd_m)
    )
    return {"bias": bias, "correlation": correlation, "spread": sd_v / sd_m}


def critic_row(
    predicted: np.ndarray,
    mc_values: np.ndarray,
    guess: np.ndarray,
    truth: np.ndarray,
    ks: Sequence[int],
    *,
    ranking_states: int,
) -> tuple[dict[str, float], dict[str, str]]:
    """The metrics of the module docstring and, for each one that is NaN, why."""
    notes: dict[str, str] = {}
    row = {"value_mse": value_mse(predicted, mc_values)}
    if mc_values.size and float(np.ptp(mc_values)) == 0.0:
        row["ev_var"] = float("nan")
        notes["ev_var"] = (
            f"every Monte-Carlo value is {mc_values[0]:.2f}: no variance to explain (e.g. the policy never succeeds on this split)"
        )
    else:
        row["ev_var"] = explained_variance(predicted, mc_values)
    row |= fit_decomposition(predicted, mc_values)
    for key in ("bias", "correlation", "spread"):
        if np.isnan(row[key]):
            notes[key] = (
                "no states"
                if predicted.size == 0
                else "constant Monte-Carlo values"
                if float(np.ptp(mc_values)) == 0.0
                else "constant critic values"
            )
    row["ranking_probes"] = float(guess.shape[0])
    for k in ks:
        counts = ranking_counts(guess[:, :k], truth[:, :k])
        row[f"top1_k{k}"] = counts["top1"]
        row[f"mc_ties_k{k}"] = counts["mc_ties"]
        row[f"critic_ties_k{k}"] = counts["critic_ties"]
        pairs = pairwise_counts(guess[:, :k], truth[:, :k])
        row[f"pairs_k{k}"] = pairs["pairs"]
        row[f"untied_pairs_k{k}"] = pairs["untied_pairs"]
        row[f"critic_tied_pairs_k{k}"] = pairs["critic_tied_pairs"]
        if ranking_states == 0:
            notes[f"top1_k{k}"] = notes[f"pairs_k{k}"] = "not measured (ranking_states: 0)"
        elif guess.shape[0] == 0:
            notes[f"top1_k{k}"] = notes[f"pairs_k{k}"] = "no probe state had enough non-terminal candidates"
        else:
            if counts["decided"] == 0:
                notes[f"top1_k{k}"] = f"all {guess.shape[0]} probes tied: no single best candidate"
            if pairs["untied_pairs"] == 0:
                notes[f"pairs_k{k}"] = (
                    f"every candidate pair of the {guess.shape[0]} probes has equal Monte-Carlo values"
                )
    return row, notes
