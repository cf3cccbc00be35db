"""``lecritique critic sweep``: the critic's settings chosen by held-out EV, at a run's update budget.

A run's asynchronous critic makes a bounded number of updates (``critic_updates_done`` summed
over a run), each on ``critic.batch_size`` distinct replay entries that are sampled at most
``critic.replay.max_reuse`` times. The sweep gives every setting of a grid (learning rate, head
initialisation, loss, ...) that budget on the starting policy's own episodes, fed through the same
replay rules (:class:`ReplayEmulator`), and measures held-out EV (tasks held out whole, as in
``critic pretrain``) at the budget and over a longer one beside it. Several seeds redraw the
held-out split, the head and the sampling order, so a margin between two settings comes with its
spread. Each finished (setting, seed) is appended to ``OUT/results.jsonl``: a rerun continues.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import Field, ValidationError, field_validator

from lecritique.config.base import SpecModel
from lecritique.config.documents import merge_documents
from lecritique.config.experiment import ExperimentSpec, SpecError
from lecritique.critics.kinds import starting_critic
from lecritique.critics.specs import DiscriminativeCriticSpec
from lecritique.pretrain.collect import collect
from lecritique.pretrain.config import pretrained_critic
from lecritique.pretrain.replay_emulator import ReplayEmulator
from lecritique.pretrain.train import returns_ev, split_by_task, update_critic
from lecritique.training.critic_trainer import CriticTrainer
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

DEFAULT_GRID: dict[str, list[Any]] = {
    "optimizer.lr": [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3],
    "head_init": ["random", "mean_return"],
    "loss": ["bce", "mse"],
}
"""Issue 45 item 3's grid: learning rate x head initialisation x loss."""

COLLECTED_FIELDS = ("context", "privileged_key", "max_context_chars", "sibling_chars", "max_context_tokens")
"""Critic fields the collected rollouts depend on: one sweep measures one context."""

TRAIN_EV_ROWS = 256
"""Training rows the train EV is measured on (a seeded subset: the gap to held-out EV says fit vs memory)."""


class SweepConfig(SpecModel):
    """What the sweep varies and the budget it gives every setting."""

    grid: dict[str, list[Any]] = Field(default_factory=lambda: {k: list(v) for k, v in DEFAULT_GRID.items()})
    """Critic field (dotted path under ``critic``) -> the values tried; the sweep tries every combination."""
    updates: int = Field(ge=1, le=1_000_000)
    """The run's budget: critic updates an arm's critic makes (e.g. ``critic_updates_done`` summed
    over a run's metrics.jsonl, warm-up included)."""
    long_updates: int | None = Field(default=None, ge=1, le=10_000_000)
    """A longer budget beside it (None: none): training goes on to it, held-out EV is measured on the
    way, and its best is reported beside the budget's (once the rows run out, a new pass starts)."""
    eval_every: int | None = Field(default=None, ge=1, le=1_000_000)
    """Updates between held-out evaluations (None: a quarter of ``updates``)."""
    updates_per_push: float | None = Field(default=None, gt=0.0, le=1_000_000.0)
    """Critic updates per policy step of the run mirrored (its mean ``critic_updates_done``): a
    policy batch of fresh rows enters the replay every this many updates, so a critic slower than
    the policy sees rows pass out of the replay unused, as in the run. None: rows enter only when
    the replay cannot feed an update (a critic that keeps up with the policy; each row then tends
    to be used ``max_reuse`` times)."""
    tasks_per_policy: int | None = Field(default=None, ge=2, le=10_000_000)
    """Tasks the policy plays (``rollout.group_size`` episodes each; None: enough rows that the
    budget's updates never sample a row more than ``max_reuse`` times, with a quarter to spare)."""
    held_out_fraction: float = Field(default=0.2, gt=0.0, lt=1.0)
    """Share of tasks (whole groups) held out for the EV."""
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """Seeds of the split, the head and the sampling order; each setting runs once per seed."""

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for path, values in grid.items():
            if path.split(".")[0] in COLLECTED_FIELDS:
                raise ValueError(
                    f"grid.{path}: the rollouts are collected with one critic context; "
                    f"sweep each with --set critic.{path}=VALUE instead"
                )
            if not values:
                raise ValueError(f"grid.{path}: no values to try")
        return grid

    def every_eval(self) -> int:
        return self.eval_every or max(1, self.updates // 4)


def parse_sweep_config(values: dict[str, Any]) -> SweepConfig:
    try:
        return SweepConfig.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise SpecError(f"sweep settings: {problems}") from None


def _nested(path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    return {head: _nested(rest, value) if rest else value}


def settings_of(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the grid's order."""
    paths = list(grid)
    return [dict(zip(paths, values, strict=True)) for values in itertools.product(*(grid[p] for p in paths))]


def critic_with(critic: DiscriminativeCriticSpec, setting: dict[str, Any]) -> DiscriminativeCriticSpec:
    """The spec's critic with one setting of the grid; a bad value is refused naming its field."""
    document = critic.model_dump(mode="json")
    for path, value in setting.items():
        document = merge_documents(document, _nested(path, value))
    try:
        return DiscriminativeCriticSpec.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(f"critic.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise SpecError(f"grid setting {setting}: {problems}") from None


def setting_key(setting: dict[str, Any]) -> str:
    return json.dumps(setting, sort_keys=True)


@dataclass(frozen=True)
class SweepData:
    """The rows every setting trains and is measured on."""

    trajectories: list[Trajectory]
    mean_return: float
    policy: str


def rows_needed(config: SweepConfig, batch: int, max_reuse: int, fresh: int) -> int:
    """Training rows that feed ``config.updates`` updates in one pass (no row sampled over ``max_reuse``
    times), with a quarter to spare."""
    if config.updates_per_push is not None:
        return math.ceil(1.25 * (config.updates / config.updates_per_push + 1) * fresh)
    return math.ceil(1.25 * config.updates * batch / max_reuse)


def _fresh(spec: ExperimentSpec) -> int:
    """Rows a policy step pushes: its batch."""
    return spec.rollout.tasks_per_step * spec.rollout.group_size


def _schedule(
    spec: ExperimentSpec, critic: DiscriminativeCriticSpec, config: SweepConfig
) -> tuple[int, int, int]:
    # The replay's settings are the spec's (``--set critic.replay.max_reuse=...`` changes them), so
    # each is declared once, in the critic's own section.
    return spec.critic_batch_size, critic.replay.max_reuse, critic.replay.capacity


def collect_rows(spec: ExperimentSpec, config: SweepConfig, out: Path, progress: Any = None) -> SweepData:
    """The spec policy's episodes with the critic's contexts (cached in ``out/rollouts``)."""
    critic = pretrained_critic(spec)
    if spec.policy.path is None:
        raise ValueError("policy.path: resolve the spec's tiny policy first")
    batch, max_reuse, _ = _schedule(spec, critic, config)
    tasks = config.tasks_per_policy or math.ceil(
        rows_needed(config, batch, max_reuse, _fresh(spec))
        / spec.rollout.group_size
        / (1.0 - config.held_out_fraction)
    )
    policy = str(Path(spec.policy.path).resolve())
    (rollouts,) = collect(spec, critic, [policy], tasks, spec.seed, out / "rollouts", progress)
    return SweepData(rollouts.trajectories, rollouts.mean_reward, policy)


def _evaluate(
    trainer: CriticTrainer, train_subset: Sequence[Trajectory], held_out: Sequence[Trajectory]
) -> dict[str, float]:
    return {"held_out_ev": returns_ev(trainer, held_out), "train_ev": returns_ev(trainer, train_subset)}


def train_setting(
    spec: ExperimentSpec,
    critic: DiscriminativeCriticSpec,
    data: SweepData,
    config: SweepConfig,
    seed: int,
) -> dict[str, Any]:
    """One setting, one seed: the budget's updates (and the long budget's), held-out EV on the way."""
    batch, max_reuse, capacity = _schedule(spec, critic, config)
    train, held_out = split_by_task(data.trajectories, config.held_out_fraction, seed)
    rng = np.random.default_rng([seed, 7])
    subset = [train[i] for i in sorted(rng.permutation(len(train))[:TRAIN_EV_ROWS])]
    replay = ReplayEmulator(
        len(train), _fresh(spec), capacity, max_reuse, batch, rng, config.updates_per_push
    )
    torch.manual_seed(seed)
    trainer = starting_critic(critic, Path(data.policy), seed)
    lambda_target = spec.estimator.critic_target_lambda()
    last = max(config.updates, config.long_updates or 0)
    checkpoints = sorted({*range(config.every_eval(), last + 1, config.every_eval()), config.updates, last})
    started = time.perf_counter()
    history = [
        {"updates": 0, **_evaluate(trainer, subset, held_out), "loss": None, "passes": 1, "most_uses": 0}
    ]
    losses: list[float] = []
    budget_uses = 0
    for update in range(1, last + 1):
        losses.append(update_critic(trainer, [train[i] for i in replay.sample()], lambda_target)["loss"])
        if update == config.updates:
            budget_uses = replay.most_uses
        if update in checkpoints:
            row = {"updates": update, **_evaluate(trainer, subset, held_out), "loss": float(np.mean(losses))}
            history.append({**row, "passes": replay.passes, "most_uses": replay.most_uses})
            losses = []
            logger.info("seed %d, %d updates: held-out EV %.4f", seed, update, row["held_out_ev"])
    at_budget = next(h for h in history if h["updates"] == config.updates)
    best = max(history, key=_ranked_ev)
    return {
        "seed": seed,
        "history": history,
        "budget_ev": at_budget["held_out_ev"],
        "budget_train_ev": at_budget["train_ev"],
        "budget_most_uses": budget_uses,
        "best_ev": best["held_out_ev"],
        "best_at": best["updates"],
        "train_rows": len(train),
        "held_out_rows": len(held_out),
        "seconds": time.perf_counter() - started,
    }


def _ranked_ev(row: dict[str, Any]) -> float:
    """A history row's held-out EV for ranking (not finite, or none: below every finite one)."""
    value = row.get("held_out_ev")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else -math.inf


def run_sweep(
    spec: ExperimentSpec,
    config: SweepConfig,
    out: Path,
    *,
    progress: Any = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    train: bool = True,
) -> dict[str, Any]:
    """Every setting x seed (finished ones read back from ``out/results.jsonl``); the sweep document.
    ``train=False`` trains nothing: the document holds the finished ones only."""
    critic = pretrained_critic(spec)
    critics = [(setting, critic_with(critic, setting)) for setting in settings_of(config.grid)]
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = collect_rows(spec, config, out, progress)
    collect_seconds = time.perf_counter() - started
    results_path = out / "results.jsonl"
    done = _finished(results_path, spec, config)
    task = (
        progress.add_task("settings", total=len(critics) * len(config.seeds))
        if progress is not None
        else None
    )
    for setting, swept in critics:
        for seed in config.seeds:
            key = (setting_key(setting), seed)
            if key not in done and train:
                result = {"setting": setting, **train_setting(spec, swept, data, config, seed)}
                with results_path.open("a") as file:
                    file.write(json.dumps({**result, "fingerprint": _fingerprint(spec, config)}) + "\n")
                done[key] = result
                if on_result is not None:
                    on_result(result)
            if task is not None:
                progress.advance(task)
    results = [
        done[(setting_key(s), seed)]
        for s, _ in critics
        for seed in config.seeds
        if (setting_key(s), seed) in done
    ]
    if not results:
        raise ValueError(f"--out: {out} holds no finished setting of this sweep yet")
    return _document(spec, critic, config, data, collect_seconds, results)


def _document(
    spec: ExperimentSpec,
    critic: DiscriminativeCriticSpec,
    config: SweepConfig,
    data: SweepData,
    collect_seconds: float,
    results: list[dict[str, Any]],
) -> dict[str, Any]:
    """The sweep document: the budget and schedule every setting had, and the results."""
    batch, max_reuse, capacity = _schedule(spec, critic, config)
    return {
        "spec": spec.name,
        "environment": spec.environment.model_dump(mode="json"),
        "context": critic.context,
        "critic": critic.model_dump(
            mode="json", include={"optimizer", "loss", "head_init", "init", "tiny", "warmup_updates"}
        ),
        "policy": data.policy,
        "policy_seed": spec.seed,
        "mean_return": data.mean_return,
        "trajectories": len(data.trajectories),
        "grid": config.grid,
        "updates": config.updates,
        "long_updates": config.long_updates,
        "batch_size": batch,
        "max_reuse": max_reuse,
        "capacity": capacity,
        "fresh_per_push": _fresh(spec),
        "updates_per_push": config.updates_per_push,
        "lambda_target": spec.estimator.critic_target_lambda(),
        "seeds": config.seeds,
        "collect_seconds": collect_seconds,
        "results": results,
    }


def _fingerprint(spec: ExperimentSpec, config: SweepConfig) -> str:
    """What a result depends on besides its setting and seed (a changed budget starts afresh)."""
    critic = pretrained_critic(spec)
    parts = {
        "spec": spec.model_dump(mode="json", exclude={"name"}),
        "config": config.model_dump(mode="json", exclude={"grid", "seeds"}),
        "critic": critic.model_dump(mode="json"),
    }
    return json.dumps(parts, sort_keys=True)


def _finished(path: Path, spec: ExperimentSpec, config: SweepConfig) -> dict[tuple[str, int], dict[str, Any]]:
    if not path.is_file():
        return {}
    fingerprint = _fingerprint(spec, config)
    done = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.pop("fingerprint", None) == fingerprint:
            done[(setting_key(record["setting"]), int(record["seed"]))] = record
    return done
