"""The supervised warm start of a tiny policy, and its success measured with real episodes."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lecritique.engines.base import SamplingParams
from lecritique.engines.hf import HFEngine
from lecritique.envs.base import Environment, Task
from lecritique.episodes import EpisodePlayer
from lecritique.episodes.local import EngineSampler, LocalEnvironment
from lecritique.models.char_tokenizer import alphabet_of, build_char_tokenizer
from lecritique.models.templates import PlainTemplate, encode_turns
from lecritique.models.tiny_arch import init_tiny_policy, save_policy
from lecritique.tinybuild.config import TinyBuildConfig

logger = logging.getLogger(__name__)


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


def _batch_tensors(
    rows: list[tuple[list[int], list[bool]]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for row, (ids, mask) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        loss_mask[row, : len(ids)] = torch.tensor(mask)
    return input_ids, attention, loss_mask


def success_rate(
    model: Any,
    tokenizer: Any,
    environment: Environment,
    tasks: list[Task],
    greedy: bool,
    seed: int,
    max_positions: int,
) -> float:
    """Mean reward of one episode per task, played through ``env.reset``/``env.step`` (0/1 rewards: the success rate)."""
    sampling = SamplingParams(
        temperature=0.0 if greedy else 1.0, max_tokens=environment.max_action_chars + 1, seed=seed
    )
    engine = HFEngine.from_model(model, tokenizer, max_batch_size=512)
    player = EpisodePlayer(
        EngineSampler(engine),
        LocalEnvironment(environment),
        tokenizer,
        PlainTemplate(),
        sampling,
        max_positions,
        seeds=lambda: seed,
    )
    model.eval()
    try:
        records = player.start(tasks, 1)
        player.play(records)
    finally:
        model.train()
    return sum(record.reward for record in records) / len(records)


def _sft_step(
    model: Any,
    optimizer: torch.optim.Optimizer,
    rows: list[tuple[list[int], list[bool]]],
    pad_id: int,
    grad_clip: float,
) -> float:
    """One AdamW step on demonstrations: cross-entropy on the action tokens only."""
    input_ids, attention, loss_mask = _batch_tensors(rows, pad_id)
    logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
    targets = input_ids[:, 1:]
    token_loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view_as(targets)
    weights = loss_mask[:, 1:].float()
    loss = (token_loss * weights).sum() / weights.sum()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(loss.item())


@dataclass
class _WarmStart:
    """How the supervised warm start went."""

    steps: int = 0
    stopped_because: str = "max_steps"
    history: list[dict[str, float]] = field(default_factory=list)


def _progress(config: TinyBuildConfig, show: bool) -> Progress:
    return Progress(
        TextColumn(f"[bold]build-tiny {config.task}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}  val {task.fields[val]}"),
        TimeElapsedColumn(),
        disable=not show,
    )


def _warm_start(
    config: TinyBuildConfig,
    environment: Environment,
    model: Any,
    tokenizer: Any,
    pool: list[Task],
    validation: list[Task],
    deadline: float | None,
    show_progress: bool,
) -> _WarmStart:
    """SFT steps until validation success reaches the target, the step budget ends, or the deadline (if any) passes."""
    assert config.max_steps is not None and config.stop_at_success is not None
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / max(1, config.warmup_steps))
    )
    template = PlainTemplate()
    run = _WarmStart()
    model.train()
    torch.manual_seed(config.seed)
    with _progress(config, show_progress) as progress:
        bar = progress.add_task("train", total=config.max_steps, loss=float("nan"), val="-")
        while run.steps < config.max_steps:
            rows = [
                encode_turns(template, tokenizer, environment.demonstrations(rng.choice(pool), rng).turns)
                for _ in range(config.batch_size)
            ]
            loss = _sft_step(model, optimizer, rows, tokenizer.pad_token_id, config.grad_clip)
            schedule.step()
            run.steps += 1
            progress.update(bar, advance=1, loss=loss)
            if run.steps % config.eval_every == 0 or run.steps == config.max_steps:
                success = success_rate(
                    model,
                    tokenizer,
                    environment,
                    validation,
                    False,
                    config.seed + run.steps,
                    config.architecture.max_positions,
                )
                run.history.append({"step": run.steps, "loss": loss, "validation_success": success})
                progress.update(bar, val=f"{success:.0%}")
                logger.info("step %d: loss %.4f, validation success %.3f", run.steps, loss, success)
                if success >= config.stop_at_success:
                    run.stopped_because = "target"
                    break
            if deadline is not None and time.monotonic() > deadline:
                run.stopped_because = "time"
                break
    return run


def train(
    config: TinyBuildConfig, environment: Environment, out: Path, show_progress: bool
) -> dict[str, Any]:
    """Build the tiny model of ``config`` into ``out``; returns the build report (without its cache keys)."""
    started = time.monotonic()
    pool = environment.sample_tasks(config.train_pool, split="train", seed=config.seed)
    validation = environment.sample_tasks(config.validation_tasks, split="train", seed=config.seed + 7919)
    held_out = environment.sample_tasks(config.eval_tasks, split="eval", seed=config.seed)
    tokenizer = build_char_tokenizer(
        _task_alphabet(environment, pool + validation + held_out, random.Random(config.seed))
    )
    model = init_tiny_policy(tokenizer, config.architecture, config.seed)
    logger.info(
        "tiny build %s: %d parameters, vocabulary %d, %d training tasks",
        config.task,
        model.num_parameters(),
        len(tokenizer),
        len(pool),
    )
    run = _warm_start(
        config,
        environment,
        model,
        tokenizer,
        pool,
        validation,
        None if config.max_minutes is None else started + 60.0 * config.max_minutes,
        show_progress,
    )
    train_seconds = time.monotonic() - started
    max_positions = config.architecture.max_positions
    greedy = success_rate(model, tokenizer, environment, held_out, True, config.seed, max_positions)
    sampled = success_rate(model, tokenizer, environment, held_out, False, config.seed, max_positions)
    save_policy(model, tokenizer, out)
    task = config.tiny_task()
    return {
        "task": config.task,
        "environment": task.environment,
        "environment_config": task.environment_config,
        "seed": config.seed,
        "parameters": model.num_parameters(),
        "vocabulary_size": len(tokenizer),
        "steps": run.steps,
        "stopped_because": run.stopped_because,
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
        "history": run.history,
    }
