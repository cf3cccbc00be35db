"""Transport overhead: a rollout batch through the codec and gRPC against raw bytes on the same channel.

The structured call encodes trajectories into an ``EvaluateRequest`` as the orchestrator's client
does (a ``TrajectoryBatch``: each array field of every trajectory end to end in one bytes field,
written straight onto the wire by ``lecritique.rpc.wire``), sends it, and the server parses it and
decodes every trajectory (``lecritique.rpc.wire.parse_with_trajectories``: array columns stay views
of the received bytes), as the value evaluator does. The raw call sends a ready ``bytes`` object of the
same serialized size to a method without (de)serialisation on the same server and channel. The
server is its own process, as the evaluator is in a deployment: sharing the client's interpreter
would add GIL hand-offs no deployment has. Call order rotates and medians are compared: the ratio is
the fraction of the raw gRPC throughput left after encoding and decoding (goal >= 0.5).

    python bench/transport.py [--trajectories 128] [--tokens 4096] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
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

from lecritique.orchestrator.clients import value_evaluator_stub  # noqa: E402
from lecritique.rpc.server import DEFAULT_MAX_MESSAGE_BYTES, channel_options, start_server  # noqa: E402
from lecritique.rpc.wire import (  # noqa: E402
    WireRequest,
    add_servicer,
    parse_with_trajectories,
    serialize_with_trajectories,
)
from lecritique.trajectory import Trajectory  # noqa: E402
from lecritique.v1 import value_pb2, value_pb2_grpc  # noqa: E402

RAW_METHOD = "/lecritique.bench.Raw/Send"
PARSE_METHOD = "/lecritique.bench.Raw/Parse"


EVALUATOR = value_pb2.DESCRIPTOR.services_by_name["ValueEvaluator"]


class _Sink(value_pb2_grpc.ValueEvaluatorServicer):
    def Evaluate(self, request: WireRequest[value_pb2.EvaluateRequest], context: Any) -> Any:
        request.trajectories()  # parsed and decoded as the value evaluator does
        return value_pb2.EvaluateResponse(value_version=0)


def _parse(data: bytes) -> WireRequest[value_pb2.EvaluateRequest]:
    return parse_with_trajectories(data, value_pb2.EvaluateRequest, "trajectories")


def _add_raw_method(server: grpc.Server) -> None:
    """Send takes and returns bytes as they are; Parse only parses an EvaluateRequest (no decode)."""
    send = grpc.unary_unary_rpc_method_handler(lambda request, context: b"")
    parse = grpc.unary_unary_rpc_method_handler(lambda request, context: b"", request_deserializer=_parse)
    handlers = grpc.method_handlers_generic_handler("lecritique.bench.Raw", {"Send": send, "Parse": parse})
    server.add_generic_rpc_handlers((handlers,))


def rollout_batch(trajectories: int, tokens: int, prompt: int = 256) -> list[Trajectory]:
    rng = np.random.default_rng(0)
    return [
        Trajectory(
            f"t{i}",
            "task",
            i // 4,
            rng.integers(0, 100, prompt),
            rng.integers(0, 100, tokens),
            rng.random(tokens) < 0.8,
            rng.random(tokens).astype(np.float32),
            np.zeros(tokens, dtype=np.int32),
            1.0,
            0,
            values=rng.random(tokens).astype(np.float32),
        )
        for i in range(trajectories)
    ]


def _encode(batch: list[Trajectory]) -> bytes:
    """The Evaluate request on the wire, as ``ValueEvaluatorClient.evaluate`` sends it."""
    request = value_pb2.EvaluateRequest()
    for _ in batch:
        request.inputs.add()
    return serialize_with_trajectories(request, "trajectories", batch)


def _serve(port: Any, stop: Any) -> None:
    """The server process: the decoding sink and the raw method, until ``stop`` is set."""
    server = start_server(
        service="bench-transport",
        add_servicers=lambda s: (
            add_servicer(s, _Sink(), EVALUATOR, {"Evaluate": "trajectories"}),
            _add_raw_method(s),
        ),
        service_names=["lecritique.v1.ValueEvaluator"],
        port=0,
        host="127.0.0.1",
    )
    port.value = server.port
    stop.wait()
    server.stop(grace=0)


def measure(trajectories: int, tokens: int, repeats: int) -> dict[str, float]:
    batch = rollout_batch(trajectories, tokens)
    context = multiprocessing.get_context("spawn")
    port, stop = context.Value("i", 0), context.Event()
    server = context.Process(target=_serve, args=(port, stop), daemon=True)
    server.start()
    deadline = time.monotonic() + 120
    while not port.value and server.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not port.value:
        raise RuntimeError("the transport bench's server process did not start")
    channel = grpc.insecure_channel(
        f"127.0.0.1:{port.value}", options=channel_options(DEFAULT_MAX_MESSAGE_BYTES)
    )
    try:
        evaluate = value_evaluator_stub(channel).Evaluate
        raw, parse = channel.unary_unary(RAW_METHOD), channel.unary_unary(PARSE_METHOD)
        serialized = _encode(batch)
        size = len(serialized)
        payload = np.random.default_rng(1).bytes(size)
        calls = {
            "structured": lambda: evaluate(_encode(batch), timeout=120),
            "raw": lambda: raw(payload, timeout=120),
            "parse_only": lambda: parse(serialized, timeout=120),
        }
        seconds: dict[str, list[float]] = {name: [] for name in calls}
        order = list(calls)
        for index in range(repeats + 1):
            # The order rotates: each call inherits the allocator and socket state the one before
            # leaves, and that order effect moved the ratio by ~0.1 when the order was fixed.
            for name in order[index % len(order) :] + order[: index % len(order)]:
                start = time.perf_counter()
                calls[name]()
                if index:  # the first round warms every path up
                    seconds[name].append(time.perf_counter() - start)
    finally:
        channel.close()
        stop.set()
        server.join(30)
    structured, raw_time, parse_only = (
        statistics.median(seconds[name]) for name in ("structured", "raw", "parse_only")
    )
    return {
        "bytes": float(size),
        "structured_mb_s": size / structured / 1e6,
        "raw_mb_s": size / raw_time / 1e6,
        "parse_only_mb_s": size / parse_only / 1e6,
        "ratio": raw_time / structured,
        "parse_only_ratio": raw_time / parse_only,
    }


def breakdown(trajectories: int, tokens: int, repeats: int) -> dict[str, float]:
    """Milliseconds of each CPU stage of the structured call, outside gRPC (medians)."""
    batch = rollout_batch(trajectories, tokens)
    data = _encode(batch)
    parsed = _parse(data)
    stages = {
        "encode_ms": lambda: _encode(batch),
        "parse_ms": lambda: _parse(data),
        "decode_ms": parsed.trajectories,
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


def transport_ratio(
    console: Console, trajectories: int = 128, tokens: int = 4096, repeats: int = 7
) -> dict[str, float]:
    result = measure(trajectories, tokens, repeats)
    result.update(breakdown(trajectories, tokens, repeats))
    table = Table(
        title=f"transport: rollout batch of {trajectories} trajectories x {tokens} tokens "
        f"({result['bytes'] / 1e6:.1f} MB serialized), one channel"
    )
    for column in ("call", "MB/s", "ratio"):
        table.add_column(column, justify="right")
    table.add_row(
        "encode + gRPC + decode (Evaluate)", f"{result['structured_mb_s']:,.0f}", f"{result['ratio']:.2f}"
    )
    table.add_row(
        "serialized request, parse only (no decode)",
        f"{result['parse_only_mb_s']:,.0f}",
        f"{result['parse_only_ratio']:.2f}",
    )
    table.add_row("raw bytes gRPC", f"{result['raw_mb_s']:,.0f}", "1.00")
    console.print(table)
    raw_ms = 1e3 * result["bytes"] / (result["raw_mb_s"] * 1e6)
    console.print(
        f"where the structured call's time goes (ms): encode onto the wire {result['encode_ms']:.1f}, "
        f"parse {result['parse_ms']:.1f}, decode {result['decode_ms']:.1f}; "
        f"the raw call {raw_ms:.1f}; one numpy copy of the payload {result['memory_copy_ms']:.1f}"
    )
    # Each structured call fills fresh multi-MB buffers; glibc malloc hands them back to the kernel
    # and page-faults them in again, which this machine's VM makes slow (tcmalloc halved the call).
    console.print(f"allocator: {os.environ.get('LD_PRELOAD') or 'glibc malloc'}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trajectories", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args()
    result = transport_ratio(Console(width=160), args.trajectories, args.tokens, args.repeats)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
