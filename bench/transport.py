"""Transport overhead: a rollout batch through the codec and gRPC against raw bytes on the same channel.

The structured call encodes trajectories into an ``EvaluateRequest`` (packed arrays), sends it, and
the server decodes every trajectory, as the value evaluator does. The raw call sends a ready
``bytes`` object of the same serialized size to a method without (de)serialisation on the same
server and channel. Calls alternate and medians are compared: the ratio is the fraction of the raw
gRPC throughput left after encoding and decoding (goal >= 0.5).

    python bench/transport.py [--trajectories 128] [--tokens 4096] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs")]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lecritique.rpc.codec import trajectory_from_proto, trajectory_to_proto  # noqa: E402
from lecritique.rpc.server import DEFAULT_MAX_MESSAGE_BYTES, channel_options, start_server  # noqa: E402
from lecritique.trajectory import Trajectory  # noqa: E402
from lecritique.v1 import value_pb2, value_pb2_grpc  # noqa: E402

RAW_METHOD = "/lecritique.bench.Raw/Send"


class _Sink(value_pb2_grpc.ValueEvaluatorServicer):
    def Evaluate(self, request: Any, context: Any) -> Any:
        for item in request.inputs:
            trajectory_from_proto(item.trajectory)  # decode like the value evaluator
        return value_pb2.EvaluateResponse(value_version=0)


def _add_raw_method(server: grpc.Server) -> None:
    """A method that takes and returns bytes as they are (no proto parsing)."""
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("lecritique.bench.Raw", {"Send": handler}),))


def rollout_batch(trajectories: int, tokens: int, prompt: int = 256) -> list[Trajectory]:
    rng = np.random.default_rng(0)
    return [
        Trajectory(
            f"t{i}", "task", i // 4, rng.integers(0, 100, prompt), rng.integers(0, 100, tokens),
            rng.random(tokens) < 0.8, rng.random(tokens).astype(np.float32), np.zeros(tokens, dtype=np.int32), 1.0, 0,
            values=rng.random(tokens).astype(np.float32),
        )
        for i in range(trajectories)
    ]


def _encode(batch: list[Trajectory]) -> value_pb2.EvaluateRequest:
    request = value_pb2.EvaluateRequest()
    for trajectory in batch:
        trajectory_to_proto(trajectory, request.inputs.add().trajectory)
    return request


def measure(trajectories: int, tokens: int, repeats: int) -> dict[str, float]:
    batch = rollout_batch(trajectories, tokens)
    server = start_server(
        service="bench-transport",
        add_servicers=lambda s: (value_pb2_grpc.add_ValueEvaluatorServicer_to_server(_Sink(), s), _add_raw_method(s)),
        service_names=["lecritique.v1.ValueEvaluator"], port=0, host="127.0.0.1",
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=channel_options(DEFAULT_MAX_MESSAGE_BYTES))
    try:
        evaluate = value_pb2_grpc.ValueEvaluatorStub(channel).Evaluate
        raw = channel.unary_unary(RAW_METHOD)
        size = _encode(batch).ByteSize()
        payload = np.random.default_rng(1).bytes(size)
        structured_seconds, raw_seconds = [], []
        for index in range(repeats + 1):
            start = time.perf_counter()
            evaluate(_encode(batch), timeout=120)
            middle = time.perf_counter()
            raw(payload, timeout=120)
            end = time.perf_counter()
            if index:  # the first pair warms both paths up
                structured_seconds.append(middle - start)
                raw_seconds.append(end - middle)
    finally:
        channel.close()
        server.stop(grace=0)
    structured, raw_time = statistics.median(structured_seconds), statistics.median(raw_seconds)
    return {"bytes": float(size), "structured_mb_s": size / structured / 1e6, "raw_mb_s": size / raw_time / 1e6,
            "ratio": raw_time / structured}


def breakdown(trajectories: int, tokens: int, repeats: int) -> dict[str, float]:
    """Milliseconds of each CPU stage of the structured call, outside gRPC (medians)."""
    batch = rollout_batch(trajectories, tokens)
    request = _encode(batch)
    data = request.SerializeToString()
    parsed = value_pb2.EvaluateRequest.FromString(data)
    stages = {
        "encode_ms": lambda: _encode(batch),
        "serialize_ms": request.SerializeToString,
        "parse_ms": lambda: value_pb2.EvaluateRequest.FromString(data),
        "decode_ms": lambda: [trajectory_from_proto(item.trajectory) for item in parsed.inputs],
        "memory_copy_ms": lambda: np.frombuffer(data, dtype=np.uint8).copy(),
    }
    timings = {}
    for name, stage in stages.items():
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            stage()
            seconds.append(time.perf_counter() - start)
        timings[name] = 1e3 * statistics.median(seconds)
    return timings


def transport_ratio(console: Console, trajectories: int = 128, tokens: int = 4096, repeats: int = 7) -> dict[str, float]:
    result = measure(trajectories, tokens, repeats)
    result.update(breakdown(trajectories, tokens, repeats))
    table = Table(title=f"transport: rollout batch of {trajectories} trajectories x {tokens} tokens "
                        f"({result['bytes'] / 1e6:.1f} MB serialized), one channel")
    for column in ("call", "MB/s", "ratio"):
        table.add_column(column, justify="right")
    table.add_row("encode + gRPC + decode (Evaluate)", f"{result['structured_mb_s']:,.0f}", f"{result['ratio']:.2f}")
    table.add_row("raw bytes gRPC", f"{result['raw_mb_s']:,.0f}", "1.00")
    console.print(table)
    raw_ms = 1e3 * result["bytes"] / (result["raw_mb_s"] * 1e6)
    console.print(
        f"where the structured call's time goes (ms): encode {result['encode_ms']:.1f}, protobuf serialize "
        f"{result['serialize_ms']:.1f}, parse {result['parse_ms']:.1f}, decode {result['decode_ms']:.1f}; "
        f"the raw call {raw_ms:.1f}; one numpy copy of the payload {result['memory_copy_ms']:.1f}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trajectories", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    transport_ratio(Console(width=160), args.trajectories, args.tokens, args.repeats)


if __name__ == "__main__":
    main()
