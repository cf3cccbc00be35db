"""The episode runner: multi-turn conversations built in token ids, rewards from env.step."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from lecritique.engines.base import Completion, Prompts, SamplingParams
from lecritique.envs import get_environment
from lecritique.models.char_tokenizer import build_char_tokenizer
from lecritique.models.episodes import run_episodes, success_rate
from lecritique.models.templates import PlainTemplate

ENV = get_environment("sudoku", size=4, empty_cells=[3, 4])
TOKENIZER = build_char_tokenizer("1234.\nrc=x")


def solve(grid: list[list[int]]) -> list[list[int]]:
    """Brute-force 4x4 Sudoku solver (a real policy for this test, not a lookup of the answer)."""
    empties = [(r, c) for r in range(4) for c in range(4) if grid[r][c] == 0]
    for digits in itertools.product(range(1, 5), repeat=len(empties)):
        candidate = [row[:] for row in grid]
        for (r, c), d in zip(empties, digits, strict=True):
            candidate[r][c] = d
        rows_ok = all(sorted(row) == [1, 2, 3, 4] for row in candidate)
        cols_ok = all(sorted(candidate[r][c] for r in range(4)) == [1, 2, 3, 4] for c in range(4))
        boxes_ok = all(
            sorted(candidate[r][c] for r in range(br, br + 2) for c in range(bc, bc + 2)) == [1, 2, 3, 4]
            for br in (0, 2)
            for bc in (0, 2)
        )
        if rows_ok and cols_ok and boxes_ok:
            return candidate
    raise AssertionError("unsolvable grid")


class SolverEngine:
    """Reads the last grid in its prompt and fills its first empty cell correctly (or badly)."""

    def __init__(self, wrong: bool = False) -> None:
        self.wrong = wrong
        self.prompts_seen: list[str] = []

    def generate(self, prompts: Prompts, n: int = 1, sampling: SamplingParams | None = None) -> list[list[Completion]]:
        out = []
        for prompt in prompts:
            assert not isinstance(prompt, str)
            text = TOKENIZER.decode(prompt)
            self.prompts_seen.append(text)
            lines = [line for line in TOKENIZER.decode(prompt, skip_special_tokens=True).split("\n") if line]
            grid = [[0 if ch == "." else int(ch) for ch in line] for line in lines[-4:]]
            solution = solve(grid)
            r, c = next((r, c) for r in range(4) for c in range(4) if grid[r][c] == 0)
            move = f"r{r + 1}c{c + 1}={solution[r][c] % 4 + 1 if self.wrong else solution[r][c]}"
            ids = [*TOKENIZER.encode(move, add_special_tokens=False), TOKENIZER.eos_token_id]
            out.append([Completion(ids, [-0.1] * len(ids), move, "stop")])
        return out

    def load_weights(self, version: int, path: str) -> None: ...

    def info(self) -> dict[str, Any]:
        return {}

    def close(self) -> None: ...


def test_a_solving_policy_succeeds_turn_by_turn() -> None:
    tasks = ENV.sample_tasks(6, split="eval", seed=0)
    engine = SolverEngine()
    outcomes = run_episodes(engine, TOKENIZER, PlainTemplate(), ENV, tasks, SamplingParams(max_tokens=8), 512)
    assert success_rate(outcomes) == 1.0
    for task, outcome in zip(tasks, outcomes, strict=True):
        empties = task.prompt.count(".")
        assert outcome.task_id == task.task_id and outcome.turns == empties and outcome.diagnostic == "solved"
        text = TOKENIZER.decode(outcome.token_ids)
        # <bos>grid act<eos>\ngrid act<eos>...: observations between turns, EOS after every action
        assert text.startswith("<bos>" + task.prompt) and text.endswith("<eos>")
        assert text.count("<eos>") == empties and text.count("\n") == 4 + 5 * (empties - 1)
    # Turn t+1 is prompted with exactly the conversation so far (prefix-consistent token ids).
    first_turn = {p for p in engine.prompts_seen if p.count("<eos>") == 0}
    assert len(first_turn) == len(tasks)


def test_illegal_moves_end_episodes_with_reward_zero() -> None:
    tasks = ENV.sample_tasks(4, split="eval", seed=1)
    outcomes = run_episodes(SolverEngine(wrong=True), TOKENIZER, PlainTemplate(), ENV, tasks, SamplingParams(max_tokens=8), 512)
    assert success_rate(outcomes) == 0.0
    assert all(o.turns == 1 and o.diagnostic.startswith("illegal move") for o in outcomes)


def test_context_limit_ends_an_episode() -> None:
    tasks = ENV.sample_tasks(2, split="eval", seed=2)
    outcomes = run_episodes(SolverEngine(), TOKENIZER, PlainTemplate(), ENV, tasks, SamplingParams(max_tokens=8), 40)
    assert all(o.reward == 0.0 and o.diagnostic == "context limit" for o in outcomes)
    assert all(o.turns >= 1 for o in outcomes)
    with pytest.raises(ValueError, match="no episodes"):
        success_rate([])
