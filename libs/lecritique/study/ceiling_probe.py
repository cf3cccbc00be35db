"""The oracle ceiling of every critic variant, on its run's final policy and critic (``critic-eval``).

States are held-out (eval split) prefixes at every response position (segment rule ``token``),
drawn from episodes of the final policy; the ceiling estimator is :mod:`lecritique.critic_eval.ceiling`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from lecritique.config.experiment import ExperimentSpec
from lecritique.critic_eval.config import CriticEvalSpec, EvaluatedCritic
from lecritique.critics.config import SegmentsConfig
from lecritique.study.config import CeilingSpec, PlannedRun, StudySpec
from lecritique.study.runner import is_finished, run_dir
from lecritique.weights.store import WeightStore


def probe_spec(spec: ExperimentSpec, name: str, folder: Path, ceiling: CeilingSpec, seed: int) -> CriticEvalSpec | None:
    """The critic-eval spec of a finished run's final checkpoints (None: no critic or no weights)."""
    if spec.critic is None:
        return None
    store = WeightStore(folder / "weights")
    policy, critic = store.latest("policy"), store.latest("critic")
    if policy is None or critic is None:
        return None
    return CriticEvalSpec.model_validate({
        "policy": {"path": str(policy[1]), "template": spec.policy.template},
        "environment": spec.environment.model_dump(mode="json"),
        "sampling": spec.rollout.sampling.model_dump(mode="json"),
        "split": "eval", "tasks": ceiling.tasks, "group_size": ceiling.group_size,
        "states": ceiling.states, "continuations": ceiling.continuations,
        "ranking_states": 0, "position_edges": ceiling.position_edges,
        "segments": SegmentsConfig(rule="token", max_segments=4096).model_dump(mode="json"),
        "critics": [EvaluatedCritic(name=name, critic=spec.critic, path=str(critic[1])).model_dump(mode="json")],
        "seed": seed,
    })


def probe_ceilings(study: StudySpec, runs: list[PlannedRun], out: Path, console: Console) -> dict[str, Any]:
    """``{"<variant>/seed<s>": {"buckets": [...]}}`` for the finished critic runs of the probed seeds.

    Each probe's critic-eval files stay in ``<run>/ceiling/``; a probe already there is read back.
    """
    from lecritique.critic_eval.run import evaluate

    seeds = study.ceiling.seeds if study.ceiling.seeds is not None else study.seeds[:1]
    results: dict[str, Any] = {}
    for run in runs:
        folder = run_dir(out, run)
        if run.seed not in seeds or not is_finished(folder, run.spec):
            continue
        spec = probe_spec(run.spec, run.variant, folder, study.ceiling, run.seed)
        if spec is None:
            continue
        saved = folder / "ceiling" / "critic_eval.json"
        if not saved.exists():
            console.print(f"{run.key}: oracle ceiling on the final checkpoints")
            evaluate(spec, folder / "ceiling", show_progress=False)
        rows = json.loads(saved.read_text())["ceiling"]
        results[run.key] = {"buckets": [flatten(row, run.variant) for row in rows], "spec": spec.model_dump(mode="json")}
    return results


def flatten(row: dict[str, Any], critic: str) -> dict[str, Any]:
    """A bucket row with the one critic's EV and fraction at top level."""
    scored = row.get("critics", {}).get(critic, {})
    nan = float("nan")
    return {key: value for key, value in row.items() if key != "critics"} | {
        "critic_ev": scored.get("ev", nan), "fraction": scored.get("fraction", nan)
    }
