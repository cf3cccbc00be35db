"""Verifications per second for every environment (CodeIO through the sandbox).

Usage: ``python bench/envs.py [--seconds 3] [--workers 4]``

For each environment: tasks are sampled first (not timed), then correct and wrong completions are
scored in a loop for ``--seconds`` (single-turn), or whole reference episodes are stepped
(multi-turn: Sudoku, BabyAI). Reasoning-gym datasets whose scorers execute answers
(``string_insertion``: ``eval``; ``countdown``: sympy) score each answer in a fresh sandbox.
CodeIO input prediction executes reference code in a fresh sandbox per verification, measured
both sequentially and with ``--workers`` threads; output prediction needs no execution (its
reference output was computed in the sandbox at sampling time).

The second table compares scoring in the verifier's own process (as before issue #46) with
scoring through the verifier's killable worker processes (``lecritique.envs.isolation``: what
the verifier does now), side by side in the same run, for a batch of 64 answers per call (as
the orchestrator sends them) and for one answer per call; ``--isolation-only`` runs just that.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs")]

from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402
from rich.table import Table  # noqa: E402

from lecritique.envs import (  # noqa: E402
    Environment,
    Task,
    build_environment,
    get_environment,
    parse_environment_config,
)
from lecritique.envs.answers import tagged  # noqa: E402
from lecritique.envs.isolation import IsolatedEnvironment  # noqa: E402
from lecritique.envs.sandbox import Sandbox, active_layers  # noqa: E402
from lecritique.envs.scoring_pool import ScoringLimits, ScoringPool  # noqa: E402


def rate(work: Callable[[int], int], seconds: float) -> tuple[float, int]:
    """Units of work per second: ``work(i)`` does one round and returns how many units it did."""
    started, units, rounds = time.perf_counter(), 0, 0
    while time.perf_counter() - started < seconds or rounds == 0:
        units += work(rounds)
        rounds += 1
    return units / (time.perf_counter() - started), units


def single_turn(env: Environment, tasks: list[Task], answer: Callable[[Task], str]) -> Callable[[int], int]:
    def work(index: int) -> int:
        task = tasks[index % len(tasks)]
        assert env.score(task, answer(task)).reward == 1.0
        env.score(task, "<answer>wrong</answer>")
        return 2

    return work


def episodes(env: Environment, tasks: list[Task]) -> Callable[[int], int]:
    demos = [[action for _, action in env.demonstrations(task, random.Random(0)).turns] for task in tasks]

    def work(index: int) -> int:
        task, actions = tasks[index % len(tasks)], demos[index % len(tasks)]
        state = env.reset(task)
        for action in actions:
            result = env.step(state, action)
            state = result.state
        assert result.reward == 1.0
        return len(actions)

    return work


def _scorers(
    env: Environment, isolated: IsolatedEnvironment, batch: list[tuple[Task, str]]
) -> tuple[Callable[[int], int], Callable[[int], int], Callable[[int], int]]:
    def in_process(index: int) -> int:
        assert all(env.score(task, text).reward == 1.0 for task, text in batch)
        return len(batch)

    def pooled(index: int) -> int:
        assert all(result.reward == 1.0 for result in isolated.score_many(batch))
        return len(batch)

    def pooled_single(index: int) -> int:
        task, text = batch[index % len(batch)]
        assert isolated.score(task, text).reward == 1.0
        return 1

    return in_process, pooled, pooled_single


def isolation_rows(seconds: float, workers: int) -> list[tuple[str, str, float, float, float]]:
    """(environment, setting, in-process answers/s, pool answers/s batched, pool answers/s single)."""
    cases: list[tuple[str, dict[str, object], Callable[[Task], str]]] = [
        ("arithmetic", {"kind": "arithmetic"}, lambda task: str(task.reference)),
        ("countdown", {"kind": "countdown"}, lambda task: str(task.reference)),
        (
            "reasoning_gym",
            {"kind": "reasoning_gym", "datasets": {"basic_arithmetic": 2, "chain_sum": 1, "mini_sudoku": 1}},
            lambda task: tagged(str(task.reference)),
        ),
    ]
    rows = []
    pool = ScoringPool(ScoringLimits(workers=workers))
    try:
        for name, settings, answer in cases:
            config = parse_environment_config(settings)
            env = build_environment(config)
            isolated = IsolatedEnvironment(env, config, pool)
            tasks = env.sample_tasks(64, seed=0)
            batch = [(task, answer(task)) for task in tasks]

            in_process, pooled, pooled_single = _scorers(env, isolated, batch)
            before, _ = rate(in_process, seconds)
            after, _ = rate(pooled, seconds)
            single, _ = rate(pooled_single, seconds)
            rows.append((name, str(settings.get("datasets", "")) or "default", before, after, single))
    finally:
        pool.close()
    return rows


def print_isolation(rows: list[tuple[str, str, float, float, float]], workers: int, seconds: float) -> None:
    table = Table(
        title=f"Scoring in the verifier's process vs in {workers} killable workers "
        f"({os.cpu_count()} CPUs, {seconds:g} s per cell, 64 answers per batch)"
    )
    for column in ("environment", "in-process/s", "workers, batch/s", "ratio", "workers, 1 per call/s"):
        table.add_column(column)
    for name, _, before, after, single in rows:
        table.add_row(name, f"{before:,.0f}", f"{after:,.0f}", f"{after / before:.2f}", f"{single:,.0f}")
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per row")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="threads for parallel CodeIO"
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument(
        "--isolation-only", action="store_true", help="only the in-process vs scoring-workers table"
    )
    parser.add_argument("--scoring-workers", type=int, default=2, help="scoring workers of that table")
    args = parser.parse_args()
    isolation = isolation_rows(args.seconds, args.scoring_workers)
    print_isolation(isolation, args.scoring_workers, args.seconds)
    if args.isolation_only:
        return

    rows: list[tuple[str, str, float, str]] = []
    cases: list[tuple[str, Callable[[], tuple[Callable[[int], int], str, str]]]] = []

    def add(name: str, build: Callable[[], tuple[Callable[[int], int], str, str]]) -> None:
        cases.append((name, build))

    def tiny(kind: str, **config: object) -> Callable[[], tuple[Callable[[int], int], str, str]]:
        def build() -> tuple[Callable[[int], int], str, str]:
            env = get_environment(kind, **config)
            tasks = env.sample_tasks(200, seed=0)
            return single_turn(env, tasks, lambda task: str(task.reference)), "scores/s", "correct + wrong"

        return build

    add("arithmetic", tiny("arithmetic"))
    add("countdown", tiny("countdown"))

    def reasoning_gym() -> tuple[Callable[[int], int], str, str]:
        env = get_environment(
            "reasoning_gym", datasets={"basic_arithmetic": 2, "chain_sum": 1, "mini_sudoku": 1}
        )
        tasks = env.sample_tasks(200, seed=0)
        return (
            single_turn(env, tasks, lambda task: tagged(str(task.reference))),
            "scores/s",
            "3-dataset mixture",
        )

    add("reasoning_gym", reasoning_gym)

    def reasoning_gym_sandboxed(dataset: str) -> Callable[[], tuple[Callable[[int], int], str, str]]:
        def build() -> tuple[Callable[[int], int], str, str]:
            env = get_environment("reasoning_gym", datasets={dataset: 1})
            tasks = env.sample_tasks(20, seed=0)
            note = f"{dataset}: its scorer runs answers, a sandbox per answer"
            return single_turn(env, tasks, lambda task: tagged(str(task.reference))), "scores/s", note

        return build

    add("reasoning_gym", reasoning_gym_sandboxed("string_insertion"))
    add("reasoning_gym", reasoning_gym_sandboxed("countdown"))

    def sudoku(size: int, empty: list[int] | None) -> Callable[[], tuple[Callable[[int], int], str, str]]:
        def build() -> tuple[Callable[[int], int], str, str]:
            env = get_environment("sudoku", size=size, empty_cells=empty)
            return (
                episodes(env, env.sample_tasks(100, seed=0)),
                "steps/s",
                f"{size}x{size}, empty {empty or 'default'}",
            )

        return build

    add("sudoku", sudoku(4, [3, 4]))
    add("sudoku", sudoku(9, None))

    def babyai() -> tuple[Callable[[int], int], str, str]:
        env = get_environment("babyai_text")
        return episodes(env, env.sample_tasks(20, seed=0)), "steps/s", "Pickup 3x3 rooms, with text views"

    add("babyai_text", babyai)

    def babyai_replay() -> tuple[Callable[[int], int], str, str]:
        env = get_environment("babyai_text")
        tasks = env.sample_tasks(20, seed=0)
        demos = [[a for _, a in env.demonstrations(t, random.Random(0)).turns] for t in tasks]
        from lecritique.envs import EpisodeState

        def work(index: int) -> int:
            task, actions = tasks[index % len(tasks)], demos[index % len(tasks)]
            state = env.reset(task)
            for action in actions:
                replica = get_environment("babyai_text")  # a replica that never saw this episode
                state = replica.step(
                    EpisodeState(task, state.observation, state.turn, False, state.data), action
                ).state
            return len(actions)

        return work, "steps/s", "stateless replica (replays history)"

    add("babyai_text", babyai_replay)

    codeio = get_environment("codeio")
    codeio_tasks: list[Task] = []

    def codeio_case(direction: str, workers: int) -> Callable[[], tuple[Callable[[int], int], str, str]]:
        def build() -> tuple[Callable[[int], int], str, str]:
            if not codeio_tasks:
                codeio_tasks.extend(codeio.sample_tasks(24, seed=0))
            tasks = [t for t in codeio_tasks if t.metadata["direction"] == direction]

            def work(index: int) -> int:
                batch = [tasks[(index * workers + k) % len(tasks)] for k in range(workers)]
                with ThreadPoolExecutor(workers) as pool:
                    rewards = list(
                        pool.map(lambda t: codeio.score(t, tagged(str(t.reference))).reward, batch)
                    )
                assert all(reward == 1.0 for reward in rewards)
                return len(batch)

            where = "sandbox per verification" if direction == "input" else "no execution"
            return work, "verifications/s", f"{direction} prediction, {workers} thread(s), {where}"

        return build

    add("codeio", codeio_case("output", 1))
    add("codeio", codeio_case("input", 1))
    add("codeio", codeio_case("input", args.workers))

    def bare_sandbox() -> tuple[Callable[[int], int], str, str]:
        sandbox = Sandbox()

        def work(index: int) -> int:
            assert sandbox.call("def f(x):\n    return x + 1\n", "f", {"x": index}).value == index + 1
            return 1

        return work, "calls/s", "bare sandbox call (no numpy)"

    add("sandbox", bare_sandbox)

    with Progress(transient=True) as progress:
        bar = progress.add_task("benchmarking environments", total=len(cases))
        for name, build in cases:
            progress.update(bar, description=f"{name}")
            work, unit, note = build()
            per_second, _ = rate(work, args.seconds)
            rows.append((name, note, per_second, unit))
            progress.advance(bar)

    table = Table(
        title=f"Environment verification throughput ({os.cpu_count()} CPUs, {args.seconds:g} s per row)"
    )
    for column in ("environment", "setting", "rate", "unit"):
        table.add_column(column)
    for name, note, per_second, unit in rows:
        table.add_row(name, note, f"{per_second:,.1f}", unit)
    console = Console()
    console.print(table)
    console.print(f"sandbox layers: {', '.join(active_layers())}")
    if args.json:
        args.json.write_text(
            json.dumps(
                [dict(zip(("environment", "setting", "rate", "unit"), r, strict=True)) for r in rows],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
