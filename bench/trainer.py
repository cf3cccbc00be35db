"""Policy-trainer throughput: tokens/s of 1 process vs 2 data-parallel processes (torchrun, gloo).

    python bench/trainer.py [--trajectories 32] [--prompt-tokens 24] [--completion-tokens 40]
                            [--steps 6] [--pairs 3] [--loss dppo] [--json results.json]

Both sides run the real entry point (``python -m lecritique.training.policy_worker``) on the same
tiny Llama (the project's default tiny architecture, ~0.5M weights) and the same batch file.
Layouts: one process using every core (torch's default threads), the same with
OMP_WAIT_POLICY=PASSIVE, one process with one thread, and torchrun's two processes with one
thread each (its default OMP_NUM_THREADS=1), so the first two and the last use the same cores. Tokens/s counts every
input token (prompt + completion) of the steps after the first (warm-up), divided by their
summed step time; the runs alternate in pairs and medians are reported, so that load from other
processes on a shared machine hits one pair rather than one side. Process start-up (imports,
model load, rendezvous) is excluded: it is paid once per trainer lifetime.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "libs")]

from lecritique.models.tiny_arch import write_random_tiny_policy  # noqa: E402
from lecritique.training.distributed import launch_command  # noqa: E402
from lecritique.training.policy_worker import write_batch_file  # noqa: E402
from lecritique.trajectory import Trajectory  # noqa: E402

ALPHABET = "0123456789+-*/=() abcdefghijklmnopqrstuvwxyz"


def _batch(
    count: int, prompt_tokens: int, completion_tokens: int, vocab_size: int, seed: int
) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    trajectories = []
    for index in range(count):
        trajectories.append(
            Trajectory(
                trajectory_id=f"bench-{index}",
                task_id=f"task-{index // 4}",
                group_id=index // 4,
                prompt_ids=rng.integers(3, vocab_size, prompt_tokens),
                token_ids=rng.integers(3, vocab_size, completion_tokens),
                policy_mask=np.ones(completion_tokens, dtype=bool),
                logprobs=-rng.uniform(2.0, 5.0, completion_tokens),
                step_ids=np.zeros(completion_tokens, dtype=np.int32),
                reward=float(index % 2),
                policy_version=0,
                advantages=np.full(completion_tokens, 0.5 if index % 2 else -0.5, dtype=np.float32),
            )
        )
    return trajectories


def _run(
    processes: int, threads: int | None, workdir: Path, run_name: str, passive_wait: bool = False
) -> dict[str, float]:
    metrics_path = workdir / f"{run_name}.json"
    worker = [
        "-m",
        "lecritique.training.policy_worker",
        "--model-dir",
        str(workdir / "policy"),
        "--batches",
        str(workdir / "batches.bin"),
        "--config",
        str(workdir / "config.json"),
        "--metrics-out",
        str(metrics_path),
    ]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "libs"), str(REPO_ROOT)]))
    environment.pop("OMP_NUM_THREADS", None)
    environment.pop("OMP_WAIT_POLICY", None)
    if threads is not None:
        environment["OMP_NUM_THREADS"] = str(threads)
    if passive_wait:
        environment["OMP_WAIT_POLICY"] = "PASSIVE"
    command = launch_command(processes, worker)
    result = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
    steps = json.loads(metrics_path.read_text())["steps"][1:]  # the first step warms up
    tokens = sum(step["tokens"] for step in steps)
    seconds = sum(step["step_seconds"] for step in steps)
    return {
        "tokens_per_s": tokens / seconds,
        "step_seconds": seconds / len(steps),
        "tokens_per_step": tokens / len(steps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trajectories", type=int, default=32, help="trajectories per batch")
    parser.add_argument("--prompt-tokens", type=int, default=24, help="prompt length of every trajectory")
    parser.add_argument("--completion-tokens", type=int, default=40, help="policy tokens of every trajectory")
    parser.add_argument("--steps", type=int, default=6, help="policy steps per run (the first is warm-up)")
    parser.add_argument("--pairs", type=int, default=3, help="alternating (1 process, 2 processes) pairs")
    parser.add_argument("--loss", choices=["dppo", "ppo_clip"], default="dppo", help="policy loss")
    parser.add_argument("--micro-batch-tokens", type=int, default=8192, help="padded tokens per micro-batch")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be >= 2 (the first step is warm-up)")
    console = Console(width=160)

    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as temporary:
        workdir = Path(temporary)
        write_random_tiny_policy(workdir / "policy", ALPHABET, seed=0)
        vocab_size = json.loads((workdir / "policy" / "config.json").read_text())["vocab_size"]
        batch = _batch(args.trajectories, args.prompt_tokens, args.completion_tokens, vocab_size, seed=0)
        write_batch_file(workdir / "batches.bin", [batch] * args.steps)
        config = {
            "loss": {"kind": args.loss},
            "optimizer": {"lr": 1e-5},
            "micro_batch_tokens": args.micro_batch_tokens,
        }
        (workdir / "config.json").write_text(json.dumps(config))

        # (label, processes, threads per process, passive OpenMP wait): None threads lets torch
        # use every core. OpenMP threads spin while waiting by default, which collapses
        # throughput when other processes compete for the cores; PASSIVE makes them sleep.
        layouts = [
            ("1 process", 1, None, False),
            ("1 process, OMP_WAIT_POLICY=PASSIVE", 1, None, True),
            ("1 process, 1 thread", 1, 1, False),
            ("2 processes, 1 thread each", 2, 1, False),
        ]
        runs: dict[str, list[dict[str, float]]] = {label: [] for label, *_ in layouts}
        with Progress(console=console) as progress:
            task = progress.add_task("trainer runs", total=len(layouts) * args.pairs)
            for pair in range(args.pairs):
                for index, (label, processes, threads, passive) in enumerate(layouts):
                    runs[label].append(_run(processes, threads, workdir, f"run-{pair}-{index}", passive))
                    progress.advance(task)

    medians = {
        label: {key: statistics.median(run[key] for run in results) for key in results[0]}
        for label, results in runs.items()
    }
    two = medians["2 processes, 1 thread each"]["tokens_per_s"]
    ratio = two / medians["1 process"]["tokens_per_s"]
    ratio_single_thread = two / medians["1 process, 1 thread"]["tokens_per_s"]
    ratio_passive = two / medians["1 process, OMP_WAIT_POLICY=PASSIVE"]["tokens_per_s"]
    table = Table(
        title=f"policy trainer, {args.trajectories} x ({args.prompt_tokens} + {args.completion_tokens}) tokens"
    )
    table.add_column("layout")
    table.add_column("tokens/s (median)", justify="right")
    table.add_column("s/step (median)", justify="right")
    table.add_column("tokens/s per pair", justify="right")
    for label, results in runs.items():
        table.add_row(
            label,
            f"{medians[label]['tokens_per_s']:,.0f}",
            f"{medians[label]['step_seconds']:.3f}",
            ", ".join(f"{run['tokens_per_s']:,.0f}" for run in results),
        )
    console.print(table)
    console.print(
        f"2-process / 1-process tokens/s: {ratio:.2f} (vs 1 process with passive OpenMP wait: "
        f"{ratio_passive:.2f}; vs 1 process with 1 thread: {ratio_single_thread:.2f}) "
        f"on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    if args.json:
        results = {
            "runs": runs,
            "medians": medians,
            "ratio_2_over_1": ratio,
            "ratio_2_over_1_single_thread": ratio_single_thread,
            "ratio_2_over_1_passive_wait": ratio_passive,
        }
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
