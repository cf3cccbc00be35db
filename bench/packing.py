"""Packed vs padded micro-batches on the CPU: useful (non-pad) tokens per second, side by side (issue #49).

    python bench/packing.py [--rounds 5] [--json docs/bench-packing.json]

Two length distributions, each one batch trained and scored by the project's own classes on the
demo's model shape (the default tiny Llama: hidden 128, 2 layers, random weights; speed does not
depend on them):

- ``sudoku``: the demo's 4x4 Sudoku (3-4 empty cells), 32 tasks x 4 episodes (the demo's batch), played through the
  real environment and prompt template with the tiny builds' character tokenizer; each move is
  the solution's with probability ``--move-success`` and otherwise a wrong digit (illegal when it
  breaks a rule, which ends the episode, as in the demo), so rows differ by their number of
  turns, as the demo's do;
- ``long_tailed``: reasoning-trace-like rows, prompts of 16-64 tokens and lognormal responses
  (median 80 tokens, sigma 0.9, capped to fit the model's 512 positions), 64 rows.

For each: the policy trainer's step, the critic trainer's step and the critic's ``predict``,
each with ``packing`` on and off, alternating inside one process (the order flips every round)
so that load from other processes on a shared machine hits both sides alike. The two trainers of
a pair start from the same weights and take the same steps; the largest relative difference of
their losses and gradient norms, and of the critic's values, is reported beside the speed-up
(identical updates, to float32 rounding). Useful tokens/s: the batch's real tokens over the
median step time of the rounds after a warm-up round. One torch thread by default: on a machine
shared with other work, OpenMP threads that spin for a busy core make both sides' times erratic.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "libs")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lecritique.envs.sudoku import SudokuConfig, SudokuEnvironment  # noqa: E402
from lecritique.models.char_tokenizer import alphabet_of, build_char_tokenizer  # noqa: E402
from lecritique.models.templates import PlainTemplate  # noqa: E402
from lecritique.models.tiny_arch import TinyArchitecture, init_tiny_policy, save_policy  # noqa: E402
from lecritique.training.critic_trainer import CriticTrainer, CriticTrainerConfig  # noqa: E402
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig  # noqa: E402
from lecritique.trajectory import Trajectory  # noqa: E402

CONTEXT_ALPHABET = "".join(chr(code) for code in range(32, 127)) + "\n"
"""The tiny builds' alphabet: every printable character (see ``tinybuild.warmstart``)."""


def _trajectory(
    index: int, prompt: list[int], tokens: list[int], mask: list[bool], rng: np.random.Generator
) -> Trajectory:
    policy_mask = np.array(mask, dtype=bool)
    count = len(tokens)
    return Trajectory(
        trajectory_id=f"bench-{index}",
        task_id=f"task-{index // 4}",
        group_id=index // 4,
        prompt_ids=np.array(prompt, dtype=np.int64),
        token_ids=np.array(tokens, dtype=np.int64),
        policy_mask=policy_mask,
        logprobs=np.where(policy_mask, -rng.uniform(0.1, 3.0, count), 0.0).astype(np.float32),
        step_ids=np.zeros(count, dtype=np.int32),
        reward=float(index % 2),
        policy_version=0,
        advantages=np.where(policy_mask, rng.normal(size=count), 0.0).astype(np.float32),
    )


def sudoku_batch(tokenizer: Any, tasks: int, group: int, move_success: float, seed: int) -> list[Trajectory]:
    """The demo's episodes through the real environment and template; scripted moves (see the module docstring)."""
    environment = SudokuEnvironment(SudokuConfig(size=4, empty_cells=(3, 4)))
    template = PlainTemplate()
    chooser = random.Random(seed)
    rng = np.random.default_rng(seed)
    batch: list[Trajectory] = []
    for task in environment.sample_tasks(tasks, seed=seed):
        for _ in range(group):
            state = environment.reset(task)
            prompt = tokenizer.encode(template.initial(state.observation), add_special_tokens=True)
            moves = [action for _, action in environment.demonstrations(task, chooser).turns]
            tokens: list[int] = []
            mask: list[bool] = []
            for move in moves:
                if chooser.random() >= move_success:
                    move = move[:-1] + (
                        "1" if move[-1] != "1" else "2"
                    )  # a wrong digit: illegal, ends the episode
                action = [*tokenizer.encode(move, add_special_tokens=False), tokenizer.eos_token_id]
                tokens += action
                mask += [True] * len(action)
                result = environment.step(state, move)
                if result.done:
                    break
                observation = tokenizer.encode(
                    template.continuation(result.observation), add_special_tokens=False
                )
                tokens += observation
                mask += [False] * len(observation)
                state = result.state
            batch.append(_trajectory(len(batch), prompt, tokens, mask, rng))
    return batch


def long_tailed_batch(vocab: int, rows: int, max_positions: int, seed: int) -> list[Trajectory]:
    """Reasoning-trace-like rows: prompts of 16-64 tokens, lognormal responses (median 80, sigma 0.9)."""
    rng = np.random.default_rng(seed)
    batch = []
    for index in range(rows):
        prompt_len = int(rng.integers(16, 65))
        response = int(min(np.ceil(rng.lognormal(np.log(80.0), 0.9)), max_positions - prompt_len))
        prompt = rng.integers(3, vocab, prompt_len).tolist()
        tokens = rng.integers(3, vocab, response).tolist()
        batch.append(_trajectory(index, prompt, tokens, [True] * response, rng))
    return batch


def _median_rate(seconds: list[float], tokens: int) -> float:
    return tokens / statistics.median(seconds)


def compare(
    name: str,
    batch: list[Trajectory],
    model_dir: Path,
    rounds: int,
    micro_batch_tokens: int,
) -> dict[str, Any]:
    """Policy step, critic step and critic predict, packed and padded, alternating (see the module docstring)."""
    useful = sum(t.prompt_ids.shape[0] + t.token_ids.shape[0] for t in batch)
    critic_useful = useful  # no critic context in these rows
    trainers: dict[str, dict[str, Any]] = {}
    for side, packing in (("padded", False), ("packed", True)):
        settings = {"micro_batch_tokens": micro_batch_tokens, "packing": packing, "device": "cpu"}
        policy = PolicyTrainer(
            model_dir, PolicyTrainerConfig.model_validate({**settings, "optimizer": {"lr": 1e-5}})
        )
        torch.manual_seed(0)  # the same fresh critic head on both sides
        critic = CriticTrainer.from_policy(
            model_dir, CriticTrainerConfig.model_validate({**settings, "optimizer": {"lr": 1e-5}})
        )
        trainers[side] = {"policy": policy, "critic": critic}
    stages: dict[str, Callable[[Any], Any]] = {
        "policy step": lambda t: t["policy"].train_step(batch),
        "critic step": lambda t: t["critic"].train_step(batch),
        "critic predict": lambda t: t["critic"].predict(batch),
    }
    seconds: dict[str, dict[str, list[float]]] = {stage: {"padded": [], "packed": []} for stage in stages}
    padding: dict[str, dict[str, float]] = {stage: {} for stage in stages}
    worst = {"loss": 0.0, "grad_norm": 0.0, "values": 0.0}
    for round_index in range(rounds + 1):  # round 0 warms up
        order = ("padded", "packed") if round_index % 2 == 0 else ("packed", "padded")
        for stage, action in stages.items():
            results: dict[str, Any] = {}
            for side in order:
                started = time.perf_counter()
                results[side] = action(trainers[side])
                elapsed = time.perf_counter() - started
                if round_index > 0:
                    seconds[stage][side].append(elapsed)
            if stage == "critic predict":
                for mine, theirs in zip(results["packed"], results["padded"], strict=True):
                    worst["values"] = max(worst["values"], float(np.max(np.abs(mine - theirs), initial=0.0)))
            else:
                for key in ("loss", "grad_norm"):
                    a, b = results["padded"][key], results["packed"][key]
                    worst[key] = max(worst[key], abs(a - b) / max(abs(a), 1e-30))
                padding[stage] = {side: results[side]["padding_fraction"] for side in order}
    lengths = [t.prompt_ids.shape[0] + t.token_ids.shape[0] for t in batch]
    names = [f"row {i}" for i in range(len(batch))]
    for side in ("padded", "packed"):
        critic = trainers[side]["critic"]
        layouts = critic.layouts(lengths, critic.config.predict_batch_tokens, "predict_batch_tokens", names)
        padding["critic predict"][side] = 1 - sum(lengths) / sum(layout.cells for layout in layouts)
    stats: dict[str, Any] = {}
    for stage in stages:
        tokens = critic_useful if stage.startswith("critic") else useful
        rates = {side: _median_rate(seconds[stage][side], tokens) for side in ("padded", "packed")}
        stats[stage] = {
            "useful_tokens_per_s": rates,
            "ratio_packed_over_padded": rates["packed"] / rates["padded"],
            "seconds": seconds[stage],
            "padding_fraction": padding[stage] or None,
        }
    return {
        "distribution": name,
        "rows": len(batch),
        "useful_tokens": useful,
        "row_tokens": {
            "min": min(lengths),
            "median": float(np.median(lengths)),
            "p90": float(np.percentile(lengths, 90)),
            "max": max(lengths),
        },
        "stages": stats,
        "largest_relative_difference": {"loss": worst["loss"], "grad_norm": worst["grad_norm"]},
        "largest_value_difference": worst["values"],
        "layout": {side: trainers[side]["policy"].layout_line for side in trainers},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds after one warm-up round")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: steadier on a shared machine; 0: torch's default)",
    )
    parser.add_argument("--micro-batch-tokens", type=int, default=8192, help="both trainers' default")
    parser.add_argument(
        "--move-success", type=float, default=0.75, help="sudoku: chance a scripted move is right"
    )
    parser.add_argument("--sudoku-tasks", type=int, default=32, help="sudoku: tasks of 4 episodes each")
    parser.add_argument("--long-tailed-rows", type=int, default=64)
    parser.add_argument("--json", type=Path, help="write the results here (e.g. docs/bench-packing.json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    console = Console(width=160)
    architecture = TinyArchitecture()
    environment = SudokuEnvironment(SudokuConfig(size=4, empty_cells=(3, 4)))
    texts = [CONTEXT_ALPHABET, *(task.prompt for task in environment.sample_tasks(64, seed=0))]
    tokenizer = build_char_tokenizer(alphabet_of(texts))
    started = time.perf_counter()
    results: dict[str, Any] = {
        "environment": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0],
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "settings": {
            "rounds": args.rounds,
            "micro_batch_tokens": args.micro_batch_tokens,
            "move_success": args.move_success,
            "model": architecture.model_dump(),
        },
        "distributions": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-packing-") as temporary:
        model_dir = save_policy(
            init_tiny_policy(tokenizer, architecture, seed=0), tokenizer, Path(temporary) / "policy"
        )
        batches = {
            "sudoku": sudoku_batch(tokenizer, args.sudoku_tasks, 4, args.move_success, seed=0),
            "long_tailed": long_tailed_batch(
                len(tokenizer), args.long_tailed_rows, architecture.max_positions, seed=0
            ),
        }
        for name, batch in batches.items():
            console.print(f"[bold]{name}[/]: {len(batch)} rows", highlight=False)
            results["distributions"].append(
                compare(name, batch, model_dir, args.rounds, args.micro_batch_tokens)
            )
    results["environment"]["load_average_at_end"] = os.getloadavg()[0]
    results["wall_s"] = time.perf_counter() - started
    table = Table(title="useful (non-pad) tokens/s, packed vs padded, alternating in one process")
    for column in (
        "distribution",
        "rows (min/median/p90/max tokens)",
        "stage",
        "padded",
        "packed",
        "ratio",
        "padding (padded -> packed)",
    ):
        table.add_column(column, justify="left" if column in ("distribution", "stage") else "right")
    for entry in results["distributions"]:
        sizes = entry["row_tokens"]
        for stage, stat in entry["stages"].items():
            rates = stat["useful_tokens_per_s"]
            pad = stat["padding_fraction"]
            table.add_row(
                entry["distribution"],
                f"{entry['rows']} ({sizes['min']}/{sizes['median']:.0f}/{sizes['p90']:.0f}/{sizes['max']})",
                stage,
                f"{rates['padded']:,.0f}",
                f"{rates['packed']:,.0f}",
                f"{stat['ratio_packed_over_padded']:.2f}",
                f"{pad['padded']:.3f} -> {pad['packed']:.3f}" if pad else "",
            )
    console.print(table)
    for entry in results["distributions"]:
        diff = entry["largest_relative_difference"]
        console.print(
            f"{entry['distribution']}: packed vs padded steps, largest relative difference: loss {diff['loss']:.1e}, "
            f"grad norm {diff['grad_norm']:.1e}; critic values {entry['largest_value_difference']:.1e}",
            highlight=False,
        )
    console.print(
        f"{os.cpu_count()} cores, {torch.get_num_threads()} torch threads, load average "
        f"{results['environment']['load_average_at_start']:.1f} -> {results['environment']['load_average_at_end']:.1f}, "
        f"{results['wall_s']:.0f} s",
        highlight=False,
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
