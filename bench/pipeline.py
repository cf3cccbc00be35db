"""Pipeline benchmark: what the critic, the transport and the services cost the policy loop.

Node pools are emulated by CPU affinity, the same for every variant: the policy path (rollout,
environment-verifier, policy trainer, orchestrator) runs on one set of cores, the value plane
(value evaluator, value trainer, Redis) on another (by default: the first and second half of this
process's cores; `lecritique.launch.local.pools`, the split `lecritique run --pools` and a study's
`pools: true` use). Each variant is a real run of every service as a local process.

1. Critic cost (Le Critique B.1: the critic should cost the policy loop nothing): policy steps/s
   of VF (value baseline), VF with a budget of 4 critic updates per policy step
   (``critic.updates_per_step: 4``, the orchestrator waits for them) and TETHER (the spec's
   privileged critic) against MEAN (no critic), and the fraction of policy step time spent
   waiting on the value plane. Goal: ratios >= 0.9.
2. System overhead: MEAN through the services against the same loop in one process without gRPC
   (bench/inprocess.py), on the same policy cores. Goal >= 0.8.
3. Transport overhead: a rollout batch encoded, sent by gRPC and decoded, against one raw-bytes
   gRPC call of the same size on the same channel. Goal >= 0.5.

Variants run in rounds (each round runs every variant once, in the same order) and medians are
reported, so load from other processes on a shared machine hits all variants alike.

    make bench-pipeline      # or: python bench/pipeline.py [--steps N] [--rounds R] [--spec PATH]
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
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs"), str(Path(__file__).resolve().parent)]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from transport import transport_ratio  # noqa: E402

from lecritique.cli.tiny_policy import with_tiny_policy_built  # noqa: E402
from lecritique.config import load_spec, parse_spec  # noqa: E402
from lecritique.launch.local.launcher import LocalLauncher  # noqa: E402
from lecritique.launch.local.pools import CorePools  # noqa: E402
from lecritique.launch.local.processes import child_environment  # noqa: E402
from lecritique.reporting import load_metrics  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_services(spec_data: dict[str, Any], out: Path, placement: CorePools) -> list[dict[str, Any]]:
    launcher = LocalLauncher(parse_spec(spec_data), out, core_pools=placement)
    try:
        launcher.start_services()
        launcher.start_orchestrator()
        code = launcher.wait()
        if code != 0:
            raise RuntimeError(f"orchestrator failed; see {out / 'logs'}")
    finally:
        launcher.stop()
    return load_metrics(out)


def run_in_process(spec_data: dict[str, Any], out: Path, placement: CorePools) -> list[dict[str, Any]]:
    """The same loop in one process (bench/inprocess.py), started on the policy cores."""
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec_data))
    cores = placement.policy
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "inprocess.py"), str(spec_path), str(out)],
        env=child_environment(ROOT),
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=open(out / "inprocess.log", "w"),  # noqa: SIM115
    )
    return load_metrics(out)


def variants(spec_path: Path, steps: int) -> dict[str, tuple[dict[str, Any], bool]]:
    """Label -> (spec data, in one process); every variant the same but for its estimator and critic.

    The policy is resolved once (a tiny model is built here if the cache has none), so every
    variant and round trains the same model.
    """
    base = with_tiny_policy_built(load_spec(spec_path)).model_dump(mode="json")
    base["orchestrator"].update(steps=steps, eval_every=None)
    critic = base.get("critic") or {"context": "reference"}
    mean = {**base, "name": "bench-mean", "estimator": {"name": "mean"}}
    mean.pop("critic", None)
    vf_critic = {**critic, "context": "none"}
    # updates_per_step 4 needs data for 4 full-batch updates a step: each trajectory sampled up to 4 times.
    budget_critic = {
        **vf_critic,
        "updates_per_step": 4,
        "replay": {**vf_critic.get("replay", {}), "max_reuse": 4},
    }
    return {
        "MEAN": (mean, False),
        "VF": ({**base, "name": "bench-vf", "estimator": {"name": "value"}, "critic": vf_critic}, False),
        "VF, 4 updates/step": (
            {**base, "name": "bench-vf-k4", "estimator": {"name": "value"}, "critic": budget_critic},
            False,
        ),
        "TETHER": (
            {**base, "name": "bench-tether", "estimator": {"name": "tether"}, "critic": critic},
            False,
        ),
        "MEAN, one process": ({**mean, "name": "bench-mean-inprocess"}, True),
    }


SUMMARY_KEYS = ("rate", "wait", "step", "train", "batch_wait", "rollout", "updates")


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Rates and times of one run; ``updates``: the critic's mean achieved updates per step (0 without one)."""
    measured = rows[1:]  # the first step includes start-up effects
    step_seconds = [row["step_seconds"] for row in measured]
    wait = sum(row.get("value_wait_seconds", 0.0) for row in measured)
    return {
        "rate": 1.0 / statistics.mean(step_seconds),
        "wait": wait / sum(step_seconds),
        "step": statistics.mean(step_seconds),
        # Where a step's time goes: the trainer's Train call, waiting for the next batch, and how
        # long that batch took to roll out (overlapped with the previous step).
        "train": statistics.mean(row["train_seconds"] for row in measured),
        "batch_wait": statistics.mean(row["batch_wait_seconds"] for row in measured),
        "rollout": statistics.mean(row["rollout_seconds"] for row in measured),
        "updates": statistics.mean(row.get("critic_updates_done") or 0 for row in measured),
    }


def pipeline(
    spec_path: Path, steps: int, rounds: int, placement: CorePools, console: Console
) -> dict[str, dict[str, float]]:
    runs: dict[str, list[dict[str, float]]] = {}
    configured = variants(spec_path, steps)
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(rounds):
            for label, (data, in_process) in configured.items():
                out = Path(tmp) / f"{data['name']}-{round_index}"
                with console.status(f"round {round_index + 1}/{rounds}: {label}, {steps} policy steps"):
                    rows = (run_in_process if in_process else run_services)(data, out, placement)
                runs.setdefault(label, []).append(_summary(rows))
    return {
        label: {key: statistics.median(run[key] for run in results) for key in SUMMARY_KEYS}
        for label, results in runs.items()
    }


def report(
    results: dict[str, dict[str, float]], transport: dict[str, float], placement: CorePools, console: Console
) -> dict[str, float]:
    table = Table(
        title=f"policy loop: policy path on cores {sorted(placement.policy)}, value plane on {sorted(placement.value)}"
    )
    columns = (
        "variant",
        "policy steps/s",
        "mean step (s)",
        "waiting on value plane",
        "Train (s)",
        "waiting for a batch (s)",
        "batch rollout (s)",
        "critic updates/step",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for label, row in results.items():
        table.add_row(
            label,
            f"{row['rate']:.3f}",
            f"{row['step']:.2f}",
            f"{100 * row['wait']:.1f}%",
            f"{row['train']:.2f}",
            f"{row['batch_wait']:.2f}",
            f"{row['rollout']:.2f}",
            f"{row['updates']:.1f}",
        )
    console.print(table)
    mean = results["MEAN"]["rate"]
    ratios = {
        "vf_over_mean": results["VF"]["rate"] / mean,
        "vf_k4_over_mean": results["VF, 4 updates/step"]["rate"] / mean,
        "tether_over_mean": results["TETHER"]["rate"] / mean,
        "services_over_one_process": mean / results["MEAN, one process"]["rate"],
        "transport": transport["ratio"],
        "vf_value_wait": results["VF"]["wait"],
        "vf_k4_value_wait": results["VF, 4 updates/step"]["wait"],
        "tether_value_wait": results["TETHER"]["wait"],
    }
    ratio_table = Table(title="ratios")
    for column in ("ratio", "measured", "goal"):
        ratio_table.add_column(column, justify="right")
    ratio_table.add_row("VF / MEAN policy steps/s", f"{ratios['vf_over_mean']:.2f}", ">= 0.9")
    ratio_table.add_row(
        "VF 4 updates/step / MEAN policy steps/s", f"{ratios['vf_k4_over_mean']:.2f}", ">= 0.9"
    )
    ratio_table.add_row("TETHER / MEAN policy steps/s", f"{ratios['tether_over_mean']:.2f}", ">= 0.9")
    ratio_table.add_row("MEAN services / one process", f"{ratios['services_over_one_process']:.2f}", ">= 0.8")
    ratio_table.add_row("gRPC rollout batch / raw bytes", f"{ratios['transport']:.2f}", ">= 0.5")
    console.print(ratio_table)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "sudoku-mini-pvf.yaml")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-pipeline", action="store_true", help="only the transport measurement")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args()
    console = Console(width=160)
    placement = CorePools.halves()
    transport = transport_ratio(console)
    if args.skip_pipeline:
        return
    results = pipeline(args.spec, args.steps, args.rounds, placement, console)
    ratios = report(results, transport, placement, console)
    if args.json:
        args.json.write_text(
            json.dumps({"variants": results, "transport": transport, "ratios": ratios}, indent=1)
        )


if __name__ == "__main__":
    main()
