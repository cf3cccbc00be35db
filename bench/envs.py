"""Verifications per second for every environment (CodeIO through the sandbox).

Usage: ``python bench/envs.py [--seconds 3] [--workers 4]``

For each environment: tasks are sampled first (not timed), then correct and wrong completions are
scored in a loop for ``--seconds`` (single-turn), or whole reference episodes are stepped
(multi-turn: Sudoku, BabyAI). Reasoning-gym datasets whose scorers execute answers
(``string_insertion``: ``eval``; ``countdown``: sympy) score each answer in a fresh sandbox.
CodeIO input prediction executes reference code in a fresh sandbox per verification, measured
both sequentially and with ``--workers`` threads; output prediction needs no execution (its
reference output was computed in the sandbox at sampling time).
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

from lecritique.envs import Environment, Task, get_environment  # noqa: E402
from lecritique.envs.answers import tagged  # noqa: E402
from lecritique.envs.sandbox import Sandbox, active_layers  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per row")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="threads for parallel CodeIO"
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()

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
