"""Pipeline benchmark: the policy loop with and without a critic, and gRPC payload throughput.

1. ``policy steps/s`` of MEAN (no critic) vs VF (value baseline, critic on) on the same spec,
   both run here as local processes in one invocation; and the fraction of policy step time the
   VF loop spent waiting on the value plane (goal <= 5%: value learning off the critical path,
   Le Critique B.1).
2. gRPC payload throughput: packed-array trajectories sent to a real gRPC server on loopback and
   decoded there, next to copying the same raw array bytes in memory.

    make bench-pipeline              # or: python bench/pipeline.py [--steps N] [--spec PATH]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from lecritique.config import load_spec, parse_spec
from lecritique.launch.local import LocalLauncher, resolve_policy
from lecritique.reporting import load_metrics
from lecritique.rpc.codec import trajectory_from_proto, trajectory_to_proto
from lecritique.rpc.server import start_server
from lecritique.trajectory import Trajectory
from lecritique.v1 import value_pb2, value_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]


def run_pipeline(spec_data: dict, out: Path) -> list[dict]:
    launcher = LocalLauncher(parse_spec(spec_data), out)
    try:
        launcher.start_services()
        launcher.start_orchestrator()
        code = launcher.wait()
        if code != 0:
            raise RuntimeError(f"orchestrator failed; see {out / 'logs'}")
    finally:
        launcher.stop()
    return load_metrics(out)


def pipeline_rows(spec_path: Path, steps: int, console: Console) -> list[tuple[str, float, float, float]]:
    base = resolve_policy(load_spec(spec_path)).model_dump(mode="json")
    base["orchestrator"]["steps"] = steps
    variants = {
        "MEAN (no critic)": {**base, "name": "bench-mean", "estimator": {"name": "mean"}, "critic": None},
        "VF (critic)": {
            **base, "name": "bench-vf", "estimator": {"name": "value"},
            "critic": {**(base.get("critic") or {}), "context": "none"},
        },
    }
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, data in variants.items():
            data = {k: v for k, v in data.items() if v is not None}
            with console.status(f"running {label} for {steps} policy steps"):
                rows = run_pipeline(data, Path(tmp) / data["name"])
            measured = rows[1:]  # the first step includes start-up effects
            step_seconds = [row["step_seconds"] for row in measured]
            wait = sum(row.get("value_wait_seconds", 0.0) for row in measured)
            results.append((label, 1.0 / statistics.mean(step_seconds), wait / sum(step_seconds), statistics.mean(step_seconds)))
    return results


class _Sink(value_pb2_grpc.ValueEvaluatorServicer):
    def Evaluate(self, request, context):
        for item in request.inputs:
            trajectory_from_proto(item.trajectory)  # decode like a real server would
        return value_pb2.EvaluateResponse(value_version=0)


def grpc_throughput(trajectories: int, tokens: int, repeats: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    batch = [
        Trajectory(
            f"t{i}", "task", i // 4, rng.integers(0, 100, 256), rng.integers(0, 100, tokens),
            rng.random(tokens) < 0.8, rng.random(tokens), np.zeros(tokens), 1.0, 0, values=rng.random(tokens),
        )
        for i in range(trajectories)
    ]
    def encode() -> value_pb2.EvaluateRequest:
        request = value_pb2.EvaluateRequest()
        for trajectory in batch:
            trajectory_to_proto(trajectory, request.inputs.add().trajectory)
        return request

    payload = sum(t.prompt_ids.nbytes + t.token_ids.nbytes + t.policy_mask.nbytes + t.logprobs.nbytes + t.step_ids.nbytes + t.values.nbytes for t in batch)
    server = start_server(
        service="bench",
        add_servicers=lambda s: value_pb2_grpc.add_ValueEvaluatorServicer_to_server(_Sink(), s),
        service_names=["lecritique.v1.ValueEvaluator"],
        port=0,
        host="127.0.0.1",
    )
    import grpc

    from lecritique.rpc.server import DEFAULT_MAX_MESSAGE_BYTES, channel_options

    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=channel_options(DEFAULT_MAX_MESSAGE_BYTES))
    stub = value_pb2_grpc.ValueEvaluatorStub(channel)
    stub.Evaluate(encode(), timeout=60)
    start = time.perf_counter()
    for _ in range(repeats):
        stub.Evaluate(encode(), timeout=60)
    grpc_rate = payload * repeats / (time.perf_counter() - start)
    channel.close()
    server.stop(grace=0)
    arrays = [a for t in batch for a in (t.prompt_ids, t.token_ids, t.policy_mask, t.logprobs, t.step_ids, t.values)]
    start = time.perf_counter()
    for _ in range(repeats):
        for array in arrays:
            np.frombuffer(array.tobytes(), dtype=array.dtype).copy()
    copy_rate = payload * repeats / (time.perf_counter() - start)
    return grpc_rate, copy_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "sudoku-mini-pvf.yaml")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip-pipeline", action="store_true", help="only the gRPC payload measurement")
    args = parser.parse_args()
    console = Console()

    grpc_rate, copy_rate = grpc_throughput(trajectories=128, tokens=4096, repeats=5)
    table = Table(title="gRPC payload throughput (128 trajectories x 4096 tokens per request)")
    for column in ("path", "MB/s", "ratio to raw copy"):
        table.add_column(column, justify="right")
    table.add_row("gRPC Evaluate (encode + send + decode)", f"{grpc_rate / 1e6:,.0f}", f"{grpc_rate / copy_rate:.2f}")
    table.add_row("raw array bytes copy", f"{copy_rate / 1e6:,.0f}", "1.00")
    console.print(table)

    if args.skip_pipeline:
        return
    rows = pipeline_rows(args.spec, args.steps, console)
    table = Table(title=f"policy loop on {args.spec.name}, {args.steps} steps each (first step excluded)")
    for column in ("variant", "policy steps/s", "mean step (s)", "waiting on value plane"):
        table.add_column(column, justify="right")
    for label, rate, wait_fraction, step in rows:
        table.add_row(label, f"{rate:.2f}", f"{step:.2f}", f"{100 * wait_fraction:.1f}%")
    console.print(table)
    console.print(f"VF / MEAN step rate: {rows[1][1] / rows[0][1]:.2f}")


if __name__ == "__main__":
    main()
