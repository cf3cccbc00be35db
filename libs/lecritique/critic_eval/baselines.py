"""critic-eval's critic-free baselines, scored with the critics' metrics beside them (issue 41).

- ``constant``: every state valued at the mean return of all base episodes (the policy's success
  rate); its ``ev_var`` is 0 by construction and it ties every ranking probe;
- ``group mean (leave-one-out)``: a state of base episode i valued at the mean return of the other
  episodes of its group (same task), never its own: its own return is the outcome the state leads
  to, which no critic is shown. This is the baseline a critic-free estimator (RLOO, MEAN) uses; a
  critic that does not beat it adds nothing a group of peers does not already tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lecritique.critic_eval.scores import critic_row
from lecritique.episodes import EpisodeRecord

CONSTANT, GROUP_MEAN = "constant (mean return)", "group mean (leave-one-out)"
BASELINES = (CONSTANT, GROUP_MEAN)
"""The critic-free baselines of the module docstring, in the table's order."""


def baseline_values(base: Sequence[EpisodeRecord]) -> dict[str, np.ndarray]:
    """Per baseline, the value it gives every state of base episode i (index i).

    The group mean leaves episode i out; an episode alone in its group has no peers (NaN)."""
    rewards = np.array([float(record.reward) for record in base], dtype=np.float64)
    groups = np.array([record.group_id for record in base])
    group_mean = np.full(rewards.size, np.nan)
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        if members.size > 1:
            group_mean[members] = (rewards[members].sum() - rewards[members]) / (members.size - 1)
    return {
        CONSTANT: np.full(rewards.size, rewards.mean() if rewards.size else np.nan),
        GROUP_MEAN: group_mean,
    }


def tied_group_fraction(base: Sequence[EpisodeRecord]) -> float:
    """Fraction of groups whose episodes all have the same return."""
    by_group: dict[int, set[float]] = {}
    for record in base:
        by_group.setdefault(record.group_id, set()).add(float(record.reward))
    return float(np.mean([len(returns) == 1 for returns in by_group.values()])) if by_group else float("nan")


def baseline_fields(
    base: Sequence[EpisodeRecord],
    points: Sequence[Any],
    candidates: Sequence[Any],
    mc_values: np.ndarray,
    candidate_values: Sequence[float],
    spec: Any,
) -> dict[str, Any]:
    """``baselines``, ``baseline_notes`` and ``tied_groups`` of a critic-eval result: each baseline
    scored as a critic (:func:`~lecritique.critic_eval.scores.critic_row`) on the states ``points``
    and the ranking ``candidates`` (state points, each with the index ``base`` of its base episode;
    ``candidate_values``: their Monte-Carlo values, ``spec.ranking_k`` candidates per probe)."""
    k = max(spec.ranking_k) if spec.ranking_k else 0
    truth = np.asarray(candidate_values, dtype=np.float64).reshape(len(candidates) // k if k else 0, k)
    state_bases = np.array([p.base for p in points], dtype=int)
    candidate_bases = np.array([p.base for p in candidates], dtype=int)
    metrics: dict[str, dict[str, float]] = {}
    notes: dict[str, dict[str, str]] = {}
    for name, by_episode in baseline_values(base).items():
        if np.isnan(by_episode).any():
            metrics[name] = {"value_mse": float("nan"), "ev_var": float("nan")}
            notes[name] = {
                key: "group_size 1: no other episode in the group" for key in ("value_mse", "ev_var")
            }
            continue
        guess = by_episode[candidate_bases].reshape(truth.shape)
        metrics[name], why = critic_row(
            by_episode[state_bases],
            mc_values,
            guess,
            truth,
            spec.ranking_k,
            ranking_states=spec.ranking_states,
        )
        if why:
            notes[name] = why
    return {"baselines": metrics, "baseline_notes": notes, "tied_groups": tied_group_fraction(base)}
