"""Several OS processes share one stream; the reuse bound holds and the counters add up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from lecritique.replay import ReplayBuffer

WORKER = Path(__file__).with_name("replay_worker.py")


def _run_workers(embedded_redis, redis_db, subprocess_env, tmp_path, experiment, capacity, max_reuse, roles):
    """Start one process per role, release them together, return their JSON results by name."""
    processes = {}
    outputs = {}
    for name, role in roles.items():
        outputs[name] = tmp_path / f"{name}.json"
        config = {
            "url": embedded_redis.url,
            "experiment": experiment,
            "capacity": capacity,
            "max_reuse": max_reuse,
            "name": name,
            "role": role["role"],
            "ready_key": "test:ready",
            "go_key": "test:go",
            "done_key": role.get("done_key", ""),
            "output": str(outputs[name]),
            **role,
        }
        processes[name] = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(config)], env=subprocess_env, stderr=subprocess.PIPE
        )
    deadline = time.monotonic() + 60
    while redis_db.llen("test:ready") < len(roles):
        assert time.monotonic() < deadline, "workers did not start"
        assert all(process.poll() is None for process in processes.values()), "a worker died while starting"
        time.sleep(0.05)
    redis_db.rpush("test:go", *(["go"] * len(roles)))
    return processes, outputs


def _finish(processes, outputs):
    results = {}
    for name, process in processes.items():
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, f"worker {name} failed:\n{stderr.decode()}"
        results[name] = json.loads(outputs[name].read_text())
    return results


def _uses_by_id(results):
    uses: dict[str, list[int]] = defaultdict(list)
    for result in results.values():
        for entry_id, times_used in result.get("samples", []):
            uses[entry_id].append(times_used)
    return uses


def test_four_processes_drain_one_stream_without_exceeding_max_reuse(
    embedded_redis, redis_db, subprocess_env, tmp_path
):
    entries, max_reuse = 1500, 3
    buffer = ReplayBuffer(redis_db, "drain", capacity=entries, max_reuse=max_reuse)
    ids = buffer.push([f"entry-{index}".encode() for index in range(entries)], policy_version=0)

    roles = {f"sampler{index}": {"role": "sampler", "sample_size": 4} for index in range(4)}
    results = _finish(
        *_run_workers(embedded_redis, redis_db, subprocess_env, tmp_path, "drain", entries, max_reuse, roles)
    )

    uses = _uses_by_id(results)
    assert set(uses) == set(ids)
    for entry_id, seen in uses.items():
        # Drained only by reuse: every counter value 1..max_reuse was handed out exactly once.
        assert sorted(seen) == list(range(1, max_reuse + 1)), (entry_id, seen)
    total = sum(len(seen) for seen in uses.values())
    stats = buffer.stats()
    assert stats.sampled_total == total == entries * max_reuse
    assert stats.evicted_by_reason == {"capacity": 0, "reuse": entries, "age": 0}
    assert stats.depth == 0
    per_worker = {name: len(result["samples"]) for name, result in results.items()}
    assert sum(1 for count in per_worker.values() if count) >= 2, per_worker


@pytest.mark.parametrize("max_reuse", [1, 2])
def test_concurrent_pushers_and_samplers_keep_counters_consistent(
    embedded_redis, redis_db, subprocess_env, tmp_path, max_reuse
):
    capacity = 50
    buffer = ReplayBuffer(redis_db, "mixed", capacity=capacity, max_reuse=max_reuse)
    roles = {f"pusher{index}": {"role": "pusher", "batches": 40, "batch_size": 10} for index in range(2)}
    roles |= {
        f"sampler{index}": {"role": "sampler", "sample_size": 3, "done_key": "test:pushers-done"}
        for index in range(4)
    }
    processes, outputs = _run_workers(
        embedded_redis, redis_db, subprocess_env, tmp_path, "mixed", capacity, max_reuse, roles
    )
    for name in ("pusher0", "pusher1"):
        processes[name].wait(timeout=120)
    redis_db.set("test:pushers-done", 1)
    results = _finish(processes, outputs)

    pushed = [entry_id for name in ("pusher0", "pusher1") for entry_id in results[name]["pushed"]]
    assert len(pushed) == len(set(pushed)) == 800
    uses = _uses_by_id(results)
    assert set(uses) <= set(pushed)
    for entry_id, seen in uses.items():
        assert sorted(seen) == list(range(1, len(seen) + 1)) and len(seen) <= max_reuse, (entry_id, seen)

    stats = buffer.stats()
    assert stats.depth == 0
    assert stats.pushed_total == 800
    assert stats.sampled_total == sum(len(seen) for seen in uses.values())
    assert stats.evicted_by_reason["reuse"] == sum(1 for seen in uses.values() if len(seen) == max_reuse)
    assert stats.evicted_by_reason["capacity"] + stats.evicted_by_reason["reuse"] == 800
