"""The oracle ceiling of every critic variant, on its run's final policy and the critic version
its last policy step used (``critic-eval``).

States are held-out (eval split) prefixes at every response position (segment rule ``token``),
drawn from episodes of the final policy; the ceiling estimator is :mod:`lecritique.critic_eval.ceiling`.
The value trainer goes on publishing after the last step (and prunes old versions): each policy
step pins the version that scored its batch in the weight store (``WeightStore.pin``), so the last
step's survives the final held-out evaluation, and the runner keeps a hard-linked copy of the version
each step used (``runner.keep_scoring_critic``); the newest version would be a critic no policy step
ever saw. Runs from before the pin (or a pin that found its version gone) fall back to the newest
critic kept for an earlier step, and the report names it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from lecritique.config.experiment import ExperimentSpec
from lecritique.critic_eval.config import CriticEvalSpec
from lecritique.critic_eval.from_run import probe_spec as critic_eval_probe
from lecritique.reporting.report import load_metrics
from lecritique.study.config import CeilingSpec, PlannedRun, StudySpec
from lecritique.study.runner import KEPT, is_finished, run_dir
from lecritique.weights.store import WeightStore, version_dirname


def last_step_version(folder: Path) -> int | None:
    """The critic version (``value_version``) the run's last policy step used; None without one."""
    try:
        rows = load_metrics(folder)
    except FileNotFoundError:
        return None
    version = rows[-1].get("value_version") if rows else None
    return int(version) if isinstance(version, int | float) and version >= 0 else None


def last_step_critic(folder: Path) -> tuple[int | None, Path | None, str | None]:
    """(version, weights, why not): the critic the last step used, kept by the runner or still in the
    store; else the newest one the runner kept before it (an earlier step's), said by
    :func:`substituted_critic`."""
    version = last_step_version(folder)
    if version is None:
        return None, None, "no step recorded a critic version"
    for candidate in (
        folder / KEPT / version_dirname(version),
        folder / "weights" / "critic" / version_dirname(version),
    ):
        if candidate.is_dir():
            return version, candidate, None
    earlier = _newest_kept_before(folder, version)
    if earlier is not None:
        return earlier, folder / KEPT / version_dirname(earlier), None
    return (
        version,
        None,
        f"critic version {version} (the last step's) was pruned (critic.keep_versions) and not kept",
    )


def _newest_kept_before(folder: Path, version: int) -> int | None:
    """The newest critic version the runner kept that is older than ``version``. The last step's row
    is written after the run's final held-out evaluation, during which an asynchronous critic can
    publish more than ``critic.keep_versions`` versions: the last step's is then pruned before the
    runner sees the row, and the one it kept for the step before is the nearest critic there is."""
    kept = folder / KEPT
    versions = (
        [int(path.name) for path in kept.iterdir() if path.is_dir() and path.name.isdigit()]
        if kept.is_dir()
        else []
    )
    older = [v for v in versions if v < version]
    return max(older) if older else None


def substituted_critic(folder: Path, used: int | None) -> str | None:
    """What the probe says when it measured an earlier step's critic than the last step's."""
    last = last_step_version(folder)
    if used is None or last is None or used == last:
        return None
    return (
        f"critic version {used} (kept for an earlier step; the last step's, {last}, was pruned while the "
        "final held-out evaluation ran)"
    )


def probe_spec(
    spec: ExperimentSpec, name: str, folder: Path, ceiling: CeilingSpec, seed: int
) -> tuple[CriticEvalSpec | None, dict[str, Any]]:
    """The critic-eval spec of a finished run's final policy and last-step critic, and what it was
    built from (or, with None, why there is no probe)."""
    if spec.critic is None:
        return None, {"note": "no critic"}
    policy = WeightStore(folder / "weights").latest("policy")
    version, critic, why = last_step_critic(folder)
    if policy is None or critic is None:
        return None, {"note": why or "no policy weights", "critic_version": version}
    probe = critic_eval_probe(
        spec,
        str(policy[1]),
        str(critic),
        name,
        probe=ceiling,
        ranking_states=0,
        position_edges=ceiling.position_edges,
        seed=seed,
    )
    info: dict[str, Any] = {"critic_version": version, "policy_version": policy[0]}
    substituted = substituted_critic(folder, version)
    if substituted is not None:
        info["critic_note"] = substituted
    return probe, info


def probe_ceilings(study: StudySpec, runs: list[PlannedRun], out: Path, console: Console) -> dict[str, Any]:
    """``{"<variant>/seed<s>": {"buckets": [...]}}`` for the finished critic runs of the probed seeds.

    Each probe's critic-eval files stay in ``<run>/ceiling/``; a probe already there is read back.
    A run whose last-step critic is gone gets ``{"note": why}`` and no buckets.
    """
    from lecritique.critic_eval.run import evaluate

    seeds = study.ceiling.seeds if study.ceiling.seeds is not None else study.seeds[:1]
    results: dict[str, Any] = {}
    for run in runs:
        folder = run_dir(out, run)
        if run.seed not in seeds or not is_finished(folder, run.spec) or run.spec.critic is None:
            continue
        saved = folder / "ceiling" / "critic_eval.json"
        spec, source = probe_spec(run.spec, run.variant, folder, study.ceiling, run.seed)
        if not saved.exists():
            if spec is None:
                results[run.key] = {"buckets": [], **source}
                continue
            console.print(
                f"{run.key}: oracle ceiling on the final policy and critic version {source['critic_version']}"
            )
            evaluate(spec, folder / "ceiling", show_progress=False)
        data = json.loads(saved.read_text())
        rows = data["ceiling"]
        results[run.key] = {
            "buckets": [flatten(row, run.variant) for row in rows],
            "spec": data.get("spec"),
            "fit": critic_fit(data.get("states", []), run.variant),
            "ratio_se": ratio_se(data.get("states", []), run.variant, seed=run.seed),
            **source,
        }
    return results


RATIO_BOOTSTRAP = 500
"""Resamples of the ratio's bootstrap by episode."""


def ratio_se(
    states: list[dict[str, Any]], critic: str, *, samples: int = RATIO_BOOTSTRAP, seed: int = 0
) -> float:
    """Bootstrap s.e. of ev_mse / ceiling (all positions) resampling whole episodes: the states of
    one episode share its prefix, so resampling them one by one would understate it. NaN with fewer
    than two episodes or no resample whose ceiling is positive."""
    import numpy as np

    from lecritique.critic_eval.ceiling import ceiling_of, critic_ev

    scored = [s for s in states if critic in s.get("critic_values", {})]
    if not scored:
        return float("nan")
    rewards = np.array([s["mc_rewards"] for s in scored], dtype=float)
    values = np.array([s["critic_values"][critic] for s in scored], dtype=float)
    episodes = np.array([s["episode"] for s in scored])
    groups = [np.flatnonzero(episodes == e) for e in np.unique(episodes)]
    if len(groups) < 2:
        return float("nan")
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(samples):
        chosen = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        ceiling = ceiling_of(rewards[chosen]) if chosen.size >= 2 else float("nan")
        if np.isfinite(ceiling) and ceiling > 0:
            ratios.append(critic_ev(rewards[chosen], values[chosen]) / ceiling)
    finite = np.array([r for r in ratios if np.isfinite(r)])
    return float(finite.std()) if finite.size >= 2 else float("nan")


def critic_fit(states: list[dict[str, Any]], critic: str) -> dict[str, float]:
    """The critic's value MSE against the probe's Monte-Carlo values and its parts
    (:func:`~lecritique.critic_eval.scores.fit_decomposition`), from the saved states."""
    import numpy as np

    from lecritique.critic_eval.scores import fit_decomposition

    scored = [
        (s["critic_values"][critic], s["mc_value"]) for s in states if critic in s.get("critic_values", {})
    ]
    predicted = np.array([v for v, _ in scored], dtype=float)
    mc_values = np.array([m for _, m in scored], dtype=float)
    mse = float(np.mean((predicted - mc_values) ** 2)) if scored else float("nan")
    return {"states": float(len(scored)), "value_mse": mse, **fit_decomposition(predicted, mc_values)}


def flatten(row: dict[str, Any], critic: str) -> dict[str, Any]:
    """A bucket row with the one critic's ``ev_mse``, fraction and their notes at top level."""
    scored = row.get("critics", {}).get(critic, {})
    nan = float("nan")
    kept = {key: scored[key] for key in ("ev_note", "fraction_note") if key in scored}
    return {key: value for key, value in row.items() if key != "critics"} | {
        "ev_mse": scored.get("ev_mse", nan),
        "fraction": scored.get("fraction", nan),
        **kept,
    }
