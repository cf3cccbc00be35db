"""A real multi-service run with one fault per service, from a seeded schedule (``make chaos``).

Every service of a small TETHER experiment runs as a local process under ``lecritique run``'s
supervisor. Once the first policy step is done: the value evaluator hangs (SIGSTOP), then value-trainer, policy-trainer, one
rollout replica, the environment verifier and Redis are each SIGKILLed, in a seeded order at
seeded steps. Prints a timeline of faults, detections, recoveries, degraded steps and the mean
reward every 20 steps, then the measurements (the reward by third of the run among them).

    python tests/integration/chaos/chaos_run.py --out runs/chaos [--seed 0] [--steps 120] [--policy-lr 1e-4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO / "libs"), str(REPO)]

from lecritique.config import parse_spec  # noqa: E402
from lecritique.launch.local.launcher import LocalLauncher  # noqa: E402
from tests.integration.services.conftest import pipeline_spec  # noqa: E402

FAULTS = {
    "value-evaluator-0": signal.SIGSTOP,
    "value-trainer": signal.SIGKILL,
    "policy-trainer": signal.SIGKILL,
    "rollout-1": signal.SIGKILL,
    "environment": signal.SIGKILL,
    "redis": signal.SIGKILL,
}
"""Which process gets which signal (one hang, the rest killed)."""


@dataclass
class Fault:
    service: str
    signal: str
    planned_step: int
    step: int = 0
    """Policy steps completed when it was injected."""
    time: float = 0.0


@dataclass
class ChaosResult:
    rows: list[dict[str, Any]]
    faults: list[Fault]
    events: list[dict[str, Any]]
    exit_code: int
    started: float
    out: Path
    max_reuse: int
    most_uses: int
    """The most times any replay entry still in the stream was served."""
    pushed_total: int
    """Entries the replay stream counts as pushed (after the Redis restart)."""
    sampled_total: int
    """Entry uses the replay stream counts (each at most ``max_reuse`` per entry)."""
    timeline: list[str] = field(default_factory=list)


POLICY_LR = 1e-4
"""The policy's AdamW learning rate: the warm-started tiny policy's reward rises steadily within
the run at 1e-4 (in fault-free runs of 16 trajectories per step, 2e-4 fell to ~0.05 for 30 steps
before recovering and 1e-3 collapsed to 0 within 40 steps)."""


TASKS_PER_STEP, GROUP_SIZE = 8, 4
"""32 trajectories per policy step: enough that the reward's rise stands out of its noise in 120 steps."""


def chaos_spec(policy: Path, steps: int, policy_lr: float = POLICY_LR) -> dict[str, Any]:
    return pipeline_spec(
        policy,
        name="chaos",
        # Two empty cells: the tests' tiny policy solves ~40% at the start, so groups carry signal
        # and its reward has room to rise.
        environment={"kind": "sudoku", "size": 4, "empty_cells": [2, 2]},
        rollout={"replicas": 2, "tasks_per_step": TASKS_PER_STEP, "group_size": GROUP_SIZE},
        policy_trainer={"optimizer": {"lr": policy_lr}},
        critic={"context": "none", "warmup_updates": 2, "optimizer": {"lr": 1e-3}},
        orchestrator={
            # Degraded steps run fast while the evaluator restarts: the bound is not what is tested here.
            "steps": steps,
            "rpc_deadline_seconds": 8.0,
            "service_down_seconds": 180.0,
            "max_degraded_steps": 1000,
        },
    )


def schedule(seed: int, steps: int) -> list[Fault]:
    """A seeded order of the faults and the step after which each is due (spread over the run)."""
    rng = random.Random(seed)
    services = sorted(FAULTS)
    rng.shuffle(services)
    spacing = max(1, (steps - steps // 5) // len(services))
    return [
        Fault(service, FAULTS[service].name, 1 + index * spacing + rng.randint(0, max(0, spacing - 1)))
        for index, service in enumerate(services)
    ]


def _rows(out: Path) -> list[dict[str, Any]]:
    path = out / "metrics.jsonl"
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


def _events(out: Path) -> list[dict[str, Any]]:
    path = out / "logs" / "supervisor.jsonl"
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


def restarted(fault: Fault, events: list[dict[str, Any]]) -> float | None:
    """When the supervisor started the faulted service again."""
    again = [
        e["time"]
        for e in events
        if e["service"] == fault.service and e["event"] == "restarted" and e["time"] >= fault.time
    ]
    return min(again) if again else None


def recovered(fault: Fault, events: list[dict[str, Any]]) -> float | None:
    """When the faulted service was healthy again (its ``ready`` event after the fault)."""
    ready = [
        e["time"]
        for e in events
        if e["service"] == fault.service and e["event"] == "ready" and e["time"] >= fault.time
    ]
    return min(ready) if ready else None


def detected(fault: Fault, events: list[dict[str, Any]]) -> float | None:
    """When the supervisor noticed the fault (the process exited, or failed its liveness probes)."""
    seen = [
        e["time"]
        for e in events
        if e["service"] == fault.service and e["event"] in ("exited", "hung") and e["time"] >= fault.time
    ]
    return min(seen) if seen else None


def _inject(launcher: LocalLauncher, fault: Fault, completed: int) -> None:
    fault.step, fault.time = completed, time.time()
    if fault.service == "redis":
        os.kill(launcher.redis.process.pid, FAULTS[fault.service])
        return
    process = next(p for p in launcher.services if p.name == fault.service)
    assert process.process is not None
    os.killpg(process.process.pid, FAULTS[fault.service])


def _replay_stats(launcher: LocalLauncher) -> Any:
    import redis

    from lecritique.replay import ReplayBuffer

    assert launcher.spec.critic is not None and launcher.redis_url is not None
    client = redis.Redis.from_url(launcher.redis_url)
    try:
        return ReplayBuffer(
            client, launcher.experiment_id, **launcher.spec.critic.replay.model_dump()
        ).stats()
    finally:
        client.close()


def _settle(launcher: LocalLauncher, faults: list[Fault], out: Path, seconds: float) -> None:
    """Keep supervising after the run until every faulted service is healthy (to measure recovery)."""
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up and not all(recovered(f, _events(out)) for f in faults if f.time):
        for process in launcher.services:
            launcher.supervisor.check(process)
        time.sleep(0.2)


def run_chaos(
    policy: Path,
    out: Path,
    *,
    seed: int = 0,
    steps: int = 120,
    settle_seconds: float = 0.0,
    echo: Any = print,
    policy_lr: float = POLICY_LR,
) -> ChaosResult:
    launcher = LocalLauncher(parse_spec(chaos_spec(policy, steps, policy_lr)), out)
    faults = schedule(seed, steps)
    exit_codes: list[int] = []
    started = time.time()
    try:
        launcher.start_services()
        echo(
            f"{time.time() - started:7.1f}s  services up; faults planned: "
            + ", ".join(f"{f.service}@{f.planned_step}" for f in faults)
        )
        launcher.start_orchestrator()
        waiter = threading.Thread(target=lambda: exit_codes.append(launcher.wait()), daemon=True)
        waiter.start()
        pending = list(faults)
        while waiter.is_alive():
            completed = len(_rows(out))
            # The next fault waits until the previous one was noticed and its service relaunched
            # (it may still be starting: two services can be down at once, as in a real cluster).
            previous = [f for f in faults if f.time and f not in pending]
            handled = all(restarted(f, _events(out)) is not None for f in previous)
            if pending and completed >= pending[0].planned_step and handled:
                fault = pending.pop(0)
                _inject(launcher, fault, completed)
                echo(
                    f"{fault.time - started:7.1f}s  step {completed:3d}  FAULT {fault.signal} {fault.service}"
                )
            waiter.join(timeout=0.2)
        if not exit_codes:
            raise RuntimeError("the supervision loop ended without an exit code")
        stats = _replay_stats(launcher)
        _settle(launcher, faults, out, settle_seconds)
    finally:
        launcher.stop()
    replay = launcher.spec.critic.replay if launcher.spec.critic is not None else None
    max_reuse = replay.max_reuse if replay is not None else 0
    result = ChaosResult(
        _rows(out),
        faults,
        _events(out),
        exit_codes[0],
        started,
        out,
        max_reuse,
        max(stats.reuse_histogram, default=0),
        stats.pushed_total,
        stats.sampled_total,
    )
    result.timeline = timeline(result)
    (out / "chaos.json").write_text(
        json.dumps(
            {
                "faults": [vars(f) for f in faults],
                "measured": measurements(result),
                "timeline": result.timeline,
            },
            indent=1,
        )
    )
    return result


def timeline(result: ChaosResult) -> list[str]:
    lines = [(f.time, f"FAULT {f.signal} {f.service} (after step {f.step})") for f in result.faults if f.time]
    lines += [(e["time"], f"supervisor: {e['service']} {e['event']}") for e in result.events]
    for row in result.rows:
        if row.get("critic_degraded"):
            lines.append(
                (row["evaluated_at"], f"step {row['step']} degraded ({row['critic_degraded_reason']})")
            )
    for window in range(0, len(result.rows), REWARD_WINDOW):
        rows = result.rows[window : window + REWARD_WINDOW]
        mean = sum(r["reward_mean"] for r in rows) / len(rows)
        lines.append(
            (rows[-1]["evaluated_at"], f"steps {rows[0]['step']}-{rows[-1]['step']}: mean reward {mean:.3f}")
        )
    return [f"{t - result.started:7.1f}s  {text}" for t, text in sorted(lines)]


REWARD_WINDOW = 20
"""Policy steps per line of mean reward in the timeline."""


def reward_by_third(rows: list[dict[str, Any]]) -> list[float]:
    """Mean batch reward over the first, middle and last third of the steps (the rise to assert)."""
    third = len(rows) // 3
    if third == 0:
        return []
    parts = (rows[:third], rows[third : len(rows) - third], rows[len(rows) - third :])
    return [round(sum(r["reward_mean"] for r in part) / len(part), 4) for part in parts]


def measurements(result: ChaosResult) -> dict[str, Any]:
    """Per fault: seconds to detect and to recover; steps degraded; policy steps/min degraded vs healthy."""
    per_fault = {}
    for fault in result.faults:
        seen, ready = detected(fault, result.events), recovered(fault, result.events)
        per_fault[fault.service] = {
            "signal": fault.signal,
            "detect_seconds": None if seen is None else round(seen - fault.time, 1),
            "recover_seconds": None if ready is None else round(ready - fault.time, 1),
        }
    degraded = [r for r in result.rows if r["critic_degraded"]]
    healthy = [r for r in result.rows if not r["critic_degraded"]]

    def per_minute(rows: list[dict[str, Any]]) -> float | None:
        return round(60 * len(rows) / sum(r["step_seconds"] for r in rows), 2) if rows else None

    thirds = reward_by_third(result.rows)
    return {
        "faults": per_fault,
        "reward_by_third": thirds,
        "reward_rise": round(thirds[-1] - thirds[0], 4) if thirds else None,
        "degraded_steps": [r["step"] for r in degraded],
        "steps_per_minute_degraded": per_minute(degraded),
        "steps_per_minute_healthy": per_minute(healthy),
        "wall_seconds": round(
            max((e["time"] for e in result.events), default=result.started) - result.started, 1
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runs/chaos"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument(
        "--policy-lr",
        type=float,
        default=POLICY_LR,
        help="policy AdamW learning rate (1e-12: a run that cannot learn)",
    )
    args = parser.parse_args()
    from tests.tiny_policies import pipeline_policy

    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty (a run there would resume)")
    result = run_chaos(
        pipeline_policy(),
        args.out,
        seed=args.seed,
        steps=args.steps,
        settle_seconds=180,
        policy_lr=args.policy_lr,
    )
    print("\ntimeline:")
    print("\n".join(result.timeline))
    measured = measurements(result)
    print("\nmeasured:", json.dumps(measured, indent=1))
    print(f"\nreward by third of the run: {measured['reward_by_third']} (rise {measured['reward_rise']})")
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
