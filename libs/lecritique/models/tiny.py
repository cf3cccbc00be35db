"""Tiny CPU policies: a character tokenizer, a ~0.5M-parameter Llama, a supervised warm start.

``build_tiny(TinyBuildConfig(task="sudoku-mini"))`` trains on the environment's demonstrations
(SFT targets ``action + EOS``, loss on action tokens only, contexts rendered with the plain
template over the previous turns) until a validation success rate reaches the task's
``stop_at_success`` — RL needs a policy that sometimes succeeds and has room to improve — or the
step budget runs out. Success is measured with real episodes through ``env.reset``/``env.step``.

Builds are deterministic from the seed on a given machine and cached under
``$LECRITIQUE_CACHE/tiny/<hash>`` (default ``~/.cache/lecritique/tiny``), keyed by a hash of the
full build config and the source of the code that produces the model. A build cut short by the
wall-clock guard (``max_minutes``) is not cached, since it depends on the machine's speed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lecritique.engines.base import SamplingParams
from lecritique.engines.hf import HFEngine
from lecritique.envs import get_environment
from lecritique.envs.base import Environment, Task
from lecritique.models import char_tokenizer, episodes, templates, tiny_arch
from lecritique.models.char_tokenizer import alphabet_of, build_char_tokenizer
from lecritique.models.episodes import run_episodes, success_rate
from lecritique.models.templates import PlainTemplate, encode_turns
from lecritique.models.tiny_arch import TinyArchitecture, init_tiny_policy, save_policy

logger = logging.getLogger(__name__)

BUILDER_VERSION = 1
"""Bump to invalidate every cached build (the code hash already covers source changes)."""
REPORT_FILE = "build_report.json"
CONFIG_FILE = "build_config.json"


class TinyTask(BaseModel):
    """A named task for tiny models: an environment configuration and warm-start defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    environment: str
    """Environment name for ``get_environment``."""
    environment_config: dict[str, Any] = Field(default_factory=dict)
    """Keyword settings of the environment."""
    stop_at_success: float = Field(gt=0.0, le=1.0)
    """Validation success (sampled at temperature 1) at which the warm start stops."""
    max_steps: int = Field(ge=1)
    """Most optimizer steps of the warm start."""


TINY_TASKS: dict[str, TinyTask] = {
    # ~30-40% success leaves RL both signal and room (the demo must lift it by >= 15 points).
    "sudoku-mini": TinyTask(
        environment="sudoku",
        environment_config={"size": 4, "empty_cells": [3, 4]},
        stop_at_success=0.35,
        max_steps=3000,
    ),
    # Single-turn integer arithmetic ("37+45-12="); a tiny model learns it slowly, so this build
    # usually ends at its step budget (~3 min on 2 cores) well below the threshold.
    "arithmetic": TinyTask(
        environment="arithmetic",
        environment_config={},
        stop_at_success=0.35,
        max_steps=1500,
    ),
}


class TinyBuildConfig(BaseModel):
    """Everything that determines a tiny model (plus two guards that do not)."""

    model_config = ConfigDict(extra="forbid")
    task: str
    """Name in ``TINY_TASKS``."""
    seed: int = 0
    """Seed of the initialisation, the task samples, the demonstrations and the evaluations."""
    architecture: TinyArchitecture = Field(default_factory=TinyArchitecture)
    """Model shape."""
    batch_size: int = Field(default=32, ge=1)
    """Demonstration episodes per optimizer step (small batches learn more per example here:
    at equal examples seen, batch 32 reached 2% validation success where batch 128 had 0%)."""
    learning_rate: float = Field(default=1e-3, gt=0)
    """Peak AdamW learning rate (>= 3e-4 is fine for SFT; RL on these models wants ~1e-4)."""
    warmup_steps: int = Field(default=20, ge=0)
    """Linear learning-rate warm-up."""
    grad_clip: float = Field(default=1.0, gt=0)
    """Gradient-norm clip."""
    max_steps: int | None = Field(default=None, ge=1)
    """Step budget; None uses the task's."""
    stop_at_success: float | None = Field(default=None, gt=0.0, le=1.0)
    """Early-stop threshold on validation success; None uses the task's."""
    train_pool: int = Field(default=2048, ge=1)
    """Training tasks whose demonstrations are sampled (fresh random orders every time)."""
    validation_tasks: int = Field(default=128, ge=1)
    """Train-split tasks (another seed) whose success decides early stopping."""
    eval_every: int = Field(default=100, ge=1)
    """Steps between validation runs."""
    eval_tasks: int = Field(default=256, ge=1)
    """Held-out eval-split tasks of the final report."""
    max_minutes: float = Field(default=6.0, gt=0)
    """Wall-clock guard on training (not part of the cache key; a cut build is not cached). The
    default sudoku-mini build takes ~2.5-3.5 min on 2 cores; the guard only catches a stuck or
    badly overloaded machine."""

    def tiny_task(self) -> TinyTask:
        if self.task not in TINY_TASKS:
            raise ValueError(f"unknown tiny task {self.task!r}; known: {', '.join(sorted(TINY_TASKS))}")
        return TINY_TASKS[self.task]

    def resolved(self) -> TinyBuildConfig:
        """This config with the task's defaults filled in."""
        task = self.tiny_task()
        return self.model_copy(
            update={
                "max_steps": self.max_steps if self.max_steps is not None else task.max_steps,
                "stop_at_success": self.stop_at_success if self.stop_at_success is not None else task.stop_at_success,
            }
        )


@dataclass(frozen=True)
class TinyBuild:
    """Where a build lives and how it measured."""

    path: Path
    report: dict[str, Any]
    cached: bool
    """True when the model came from the cache without training."""


def default_cache_dir() -> Path:
    """``$LECRITIQUE_CACHE/tiny``, by default ``~/.cache/lecritique/tiny``."""
    base = os.environ.get("LECRITIQUE_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "lecritique"
    return root / "tiny"


def load_build_report(model_dir: str | Path) -> dict[str, Any]:
    """The ``build_report.json`` of a tiny-model directory."""
    report: dict[str, Any] = json.loads((Path(model_dir) / REPORT_FILE).read_text())
    return report


def code_version(environment: Environment) -> str:
    """Hash of the source of everything that shapes a build, the environment's module included."""
    digest = hashlib.sha256(str(BUILDER_VERSION).encode())
    modules = [sys.modules[__name__], char_tokenizer, episodes, templates, tiny_arch, inspect.getmodule(type(environment))]
    for module in modules:
        if module is not None:
            digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:16]


def build_hash(config: TinyBuildConfig, environment: Environment) -> str:
    resolved = config.resolved()
    keyed = resolved.model_dump(exclude={"max_minutes"})
    keyed["tiny_task"] = resolved.tiny_task().model_dump()
    keyed["code_version"] = code_version(environment)
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:20]


def build_tiny(
    task: str | TinyBuildConfig,
    *,
    seed: int | None = None,
    cache_dir: str | Path | None = None,
    out: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> Path:
    """The directory of the tiny model for ``task`` (a ``TINY_TASKS`` name or a full config).

    Built on first use and cached; ``seed`` overrides the config's seed; ``out`` receives a copy
    (an existing directory holding anything else is replaced only with ``force``). The build's
    measurements are in ``build_report.json`` of the returned directory.
    """
    return build_tiny_model(task, seed=seed, cache_dir=cache_dir, out=out, force=force, show_progress=show_progress).path


def build_tiny_model(
    task: str | TinyBuildConfig,
    *,
    seed: int | None = None,
    cache_dir: str | Path | None = None,
    out: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> TinyBuild:
    """Like :func:`build_tiny`, also saying whether the cache served it."""
    config = TinyBuildConfig(task=task) if isinstance(task, str) else task
    if seed is not None:
        config = config.model_copy(update={"seed": seed})
    config = config.resolved()
    tiny_task = config.tiny_task()
    environment = get_environment(tiny_task.environment, **tiny_task.environment_config)
    key = build_hash(config, environment)
    cached_dir = Path(cache_dir) / key if cache_dir is not None else default_cache_dir() / key
    if (cached_dir / REPORT_FILE).is_file():
        logger.info("tiny model %s found in cache %s", config.task, cached_dir)
        build = TinyBuild(cached_dir, load_build_report(cached_dir), cached=True)
    else:
        build = _train_and_store(config, environment, key, cached_dir, show_progress)
    if out is None:
        return build
    return TinyBuild(_copy_out(build.path, Path(out), key, force), build.report, build.cached)


def _copy_out(source: Path, out: Path, key: str, force: bool) -> Path:
    if out.exists() and any(out.iterdir()):
        existing = out / REPORT_FILE
        if existing.is_file() and json.loads(existing.read_text()).get("hash") == key:
            return out
        if not force:
            raise FileExistsError(f"output directory {out} exists and holds something else; pass --force to replace it")
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, out, dirs_exist_ok=True)
    return out


def _train_and_store(
    config: TinyBuildConfig, environment: Environment, key: str, cached_dir: Path, show_progress: bool
) -> TinyBuild:
    cached_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=cached_dir.parent))
    try:
        report = _train(config, environment, staging, show_progress)
        report["hash"] = key
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
        (staging / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n")
        if report["stopped_because"] == "time":
            logger.warning("tiny build cut by the %.1f-minute guard: not cached", config.max_minutes)
            _remove_stale_uncached(cached_dir.parent)
            final = staging.with_name(f".uncached-{key}-{os.getpid()}-{time.time_ns()}")
            staging.rename(final)
            return TinyBuild(final, report, cached=False)
        try:
            staging.rename(cached_dir)
        except OSError:
            # Another process finished the same build first; both are equivalent, keep theirs.
            shutil.rmtree(staging, ignore_errors=True)
        return TinyBuild(cached_dir, report, cached=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _remove_stale_uncached(root: Path, max_age_seconds: float = 86400.0) -> None:
    """Delete day-old builds that were cut by the time guard (never cached, only handed out)."""
    now = time.time()
    for entry in root.glob(".uncached-*"):
        if now - entry.stat().st_mtime > max_age_seconds:
            shutil.rmtree(entry, ignore_errors=True)


# Every printable ASCII character, so that critic contexts ("ref:", "peer 1.00:", score prompts)
# and any text an environment or critic writes is representable without <unk>.
CONTEXT_ALPHABET = "".join(chr(code) for code in range(32, 127)) + "\n"


def _task_alphabet(environment: Environment, tasks: list[Task], rng: random.Random) -> list[str]:
    texts: list[str] = [CONTEXT_ALPHABET]
    for task in tasks:
        texts.append(task.prompt)
        for observation, action in environment.demonstrations(task, rng).turns:
            texts += [observation, action]
    return alphabet_of(texts)


def _batch_tensors(rows: list[tuple[list[int], list[bool]]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for row, (ids, mask) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        loss_mask[row, : len(ids)] = torch.tensor(mask)
    return input_ids, attention, loss_mask


def _evaluate(
    model: Any, tokenizer: Any, environment: Environment, tasks: list[Task], greedy: bool, seed: int, max_positions: int
) -> float:
    engine = HFEngine.from_model(model, tokenizer, max_batch_size=512)
    sampling = SamplingParams(
        temperature=0.0 if greedy else 1.0, max_tokens=environment.max_action_chars + 1, seed=seed
    )
    model.eval()
    try:
        outcomes = run_episodes(engine, tokenizer, PlainTemplate(), environment, tasks, sampling, max_positions)
    finally:
        model.train()
    return success_rate(outcomes)


def _train(config: TinyBuildConfig, environment: Environment, out: Path, show_progress: bool) -> dict[str, Any]:
    started = time.monotonic()
    assert config.max_steps is not None and config.stop_at_success is not None
    rng = random.Random(config.seed)
    pool = environment.sample_tasks(config.train_pool, split="train", seed=config.seed)
    validation = environment.sample_tasks(config.validation_tasks, split="train", seed=config.seed + 7919)
    held_out = environment.sample_tasks(config.eval_tasks, split="eval", seed=config.seed)
    tokenizer = build_char_tokenizer(_task_alphabet(environment, pool + validation + held_out, random.Random(config.seed)))
    model = init_tiny_policy(tokenizer, config.architecture, config.seed)
    template = PlainTemplate()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / max(1, config.warmup_steps))
    )
    logger.info(
        "tiny build %s: %d parameters, vocabulary %d, %d training tasks",
        config.task, model.num_parameters(), len(tokenizer), len(pool),
    )
    history: list[dict[str, float]] = []
    stopped_because = "max_steps"
    step = 0
    deadline = started + 60.0 * config.max_minutes
    model.train()
    torch.manual_seed(config.seed)
    progress = Progress(
        TextColumn(f"[bold]build-tiny {config.task}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}  val {task.fields[val]}"),
        TimeElapsedColumn(),
        disable=not show_progress,
    )
    with progress:
        bar = progress.add_task("train", total=config.max_steps, loss=float("nan"), val="-")
        while step < config.max_steps:
            rows = [
                encode_turns(template, tokenizer, environment.demonstrations(rng.choice(pool), rng).turns)
                for _ in range(config.batch_size)
            ]
            input_ids, attention, loss_mask = _batch_tensors(rows, tokenizer.pad_token_id)
            logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
            targets = input_ids[:, 1:]
            token_loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
            ).view_as(targets)
            weights = loss_mask[:, 1:].float()
            loss = (token_loss * weights).sum() / weights.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            schedule.step()
            step += 1
            loss_value = loss.item()
            progress.update(bar, advance=1, loss=loss_value)
            if step % config.eval_every == 0 or step == config.max_steps:
                validation_success = _evaluate(
                    model, tokenizer, environment, validation, False, config.seed + step, config.architecture.max_positions
                )
                history.append({"step": step, "loss": loss_value, "validation_success": validation_success})
                progress.update(bar, val=f"{validation_success:.0%}")
                logger.info("step %d: loss %.4f, validation success %.3f", step, loss_value, validation_success)
                if validation_success >= config.stop_at_success:
                    stopped_because = "target"
                    break
            if time.monotonic() > deadline:
                stopped_because = "time"
                break
    train_seconds = time.monotonic() - started
    greedy = _evaluate(model, tokenizer, environment, held_out, True, config.seed, config.architecture.max_positions)
    sampled = _evaluate(model, tokenizer, environment, held_out, False, config.seed, config.architecture.max_positions)
    save_policy(model, tokenizer, out)
    task = config.tiny_task()
    return {
        "task": config.task,
        "environment": task.environment,
        "environment_config": task.environment_config,
        "seed": config.seed,
        "parameters": model.num_parameters(),
        "vocabulary_size": len(tokenizer),
        "steps": step,
        "stopped_because": stopped_because,
        "train_seconds": round(train_seconds, 1),
        "torch_threads": torch.get_num_threads(),
        "eval": {
            "split": "eval",
            "tasks": len(held_out),
            "sampled_success": sampled,
            "sampled_temperature": 1.0,
            "greedy_success": greedy,
            "measured_with": "episodes through env.reset/env.step, HF engine, plain template",
        },
        "history": history,
        "code_version": code_version(environment),
    }
