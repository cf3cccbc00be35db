"""Multi-turn Sudoku: the policy fills one empty cell per turn.

Puzzles come from reasoning-gym's generators (``mini_sudoku`` for 4x4, ``sudoku`` for 9x9); with
``empty_cells: [lo, hi]`` each puzzle is reduced to ``k ~ U{lo..hi}`` empty cells by pre-filling
randomly chosen empty cells from the solution (a tiny model cannot solve full puzzles).

Turn protocol (a small alphabet for character-level models: digits, ``.``, ``r``, ``c``, ``=``,
``x``, newline)::

    prompt        the grid, one line per row, '.' for an empty cell, each row ending in '\\n'
                  (4x4: "2.43\\n4312\\n1.34\\n3421\\n", 20 characters)
    action        r{row}c{col}={digit}, 1-based, e.g. "r1c2=1" (surrounding whitespace ignored)
    observation   after a legal move that does not finish the grid: "\\n" + the updated grid;
                  after the move that completes the grid, or a move that ends the episode: ""

A move is legal when it is well formed, names an empty cell inside the grid and a digit in
``1..size`` that does not repeat a digit of the same row, column or box. A grid completed by legal
moves is the puzzle's (unique) solution: reward 1. An illegal move ends the episode with reward 0
(or, with ``illegal_move_ends_episode: false``, is answered with ``"\\nx\\n"`` + the unchanged grid
and costs a turn). Reaching the turn limit ends the episode with reward 0. A 4x4 episode with 4
empty cells is 20 + 4*6 + 3*20 = 104 characters (plus one end-of-sequence token per action).

Splits: by a hash of the solved grid (default) or of the puzzle. 4x4 puzzles repeat across
generator seeds and there are only 288 solved 4x4 grids, so splitting by solution also keeps a
policy from being evaluated on grids whose other cells it saw during training.

Privileged context: ``solution`` (the solved grid in the prompt's format).
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from lecritique.envs.answers import clean_completion
from lecritique.envs.base import (
    Demonstration,
    Environment,
    EpisodeState,
    ScoreResult,
    Split,
    StepResult,
    Task,
)
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.splits import derive_seed, sample_split, task_id

Grid = list[list[int]]

_MOVE = re.compile(r"r(\d)c(\d)=(\d)")
_GENERATORS = {4: ("mini_sudoku", 8, 12), 9: ("sudoku", 30, 50)}
"""size -> (reasoning-gym dataset, its default min_empty, max_empty)."""
_MAX_EMPTY = {4: 12, 9: 64}
"""The most empty cells reasoning-gym's generators accept (uniqueness bound)."""


class SudokuConfig(EnvironmentConfigBase):
    kind: Literal["sudoku"] = "sudoku"
    """Selects the multi-turn Sudoku environment."""
    size: Literal[4, 9] = 4
    """Grid side: 4 (mini, for CPU runs) or 9 (for GPU runs)."""
    empty_cells: tuple[int, int] | None = None
    """Inclusive range of empty cells per puzzle; None keeps the generator's puzzle (4x4: 8-12, 9x9: 30-50)."""
    split_by: Literal["solution", "puzzle"] = "solution"
    """Content that decides the split: the solved grid (stricter) or the puzzle itself."""
    illegal_move_ends_episode: bool = True
    """End the episode with reward 0 on an illegal move; otherwise answer 'x' and let the policy retry."""
    max_turns: int | None = None
    """Turn limit; None means the number of empty cells (twice that when illegal moves are retried)."""

    @model_validator(mode="after")
    def _check_ranges(self) -> SudokuConfig:
        if self.empty_cells is not None:
            low, high = self.empty_cells
            if not 1 <= low <= high <= _MAX_EMPTY[self.size]:
                raise ValueError(
                    f"empty_cells must satisfy 1 <= low <= high <= {_MAX_EMPTY[self.size]} "
                    f"for size {self.size}, got {list(self.empty_cells)}"
                )
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        return self


def render(grid: Grid) -> str:
    """Rows of digits, '.' for empty, each row ending in a newline."""
    return "".join("".join(str(value) if value else "." for value in row) + "\n" for row in grid)


def empty_positions(grid: Grid) -> list[tuple[int, int]]:
    return [(row, col) for row, values in enumerate(grid) for col, value in enumerate(values) if value == 0]


def conflict(grid: Grid, row: int, col: int, digit: int) -> str | None:
    """Why ``digit`` cannot go at (row, col) under the rules, or None if it can."""
    size = len(grid)
    box = 2 if size == 4 else 3
    if digit in grid[row]:
        return f"{digit} already in row {row + 1}"
    if any(grid[other][col] == digit for other in range(size)):
        return f"{digit} already in column {col + 1}"
    top, left = box * (row // box), box * (col // box)
    if any(grid[r][c] == digit for r in range(top, top + box) for c in range(left, left + box)):
        return f"{digit} already in box of r{row + 1}c{col + 1}"
    return None


class SudokuEnvironment(Environment):
    name: ClassVar[str] = "sudoku"
    multi_turn: ClassVar[bool] = True
    privileged_kinds: ClassVar[tuple[str, ...]] = ("solution",)
    max_action_chars: int = 32

    def __init__(self, config: SudokuConfig | None = None) -> None:
        self.config = config or SudokuConfig()
        size = self.config.size
        if self.config.max_turns is not None:
            self.max_turns = self.config.max_turns
        else:
            most_empty = self.config.empty_cells[1] if self.config.empty_cells else _GENERATORS[size][2]
            self.max_turns = most_empty * (1 if self.config.illegal_move_ends_episode else 2)
        self._generators: dict[int, Any] = {}

    def _generator(self, seed: int) -> Any:
        if seed not in self._generators:
            import reasoning_gym  # imported lazily: importing reasoning-gym takes ~1.5 s

            dataset, min_empty, max_empty = _GENERATORS[self.config.size]
            if self.config.empty_cells is not None and self.config.empty_cells[1] > min_empty:
                min_empty = self.config.empty_cells[1]
                max_empty = max(max_empty, min_empty)
            self._generators[seed] = reasoning_gym.create_dataset(
                dataset, seed=seed, size=2**62, min_empty=min_empty, max_empty=max_empty
            )
        return self._generators[seed]

    def _candidate(self, seed: int, index: int) -> tuple[str, Task]:
        entry = self._generator(derive_seed("sudoku-generator", self.config.size, seed))[index]
        puzzle: Grid = [list(row) for row in entry["metadata"]["puzzle"]]
        solution: Grid = [list(row) for row in entry["metadata"]["solution"]]
        if self.config.empty_cells is not None:
            rng = random.Random(derive_seed("sudoku-prefill", self.config.size, seed, index))
            wanted = rng.randint(*self.config.empty_cells)
            empties = empty_positions(puzzle)
            rng.shuffle(empties)
            # A puzzle with fewer empty cells than wanted (the generator keeps uniqueness) stays as is.
            for row, col in empties[: max(0, len(empties) - wanted)]:
                puzzle[row][col] = solution[row][col]
        puzzle_text, solution_text = render(puzzle), render(solution)
        task = Task(
            task_id=task_id(self.name, puzzle_text),
            prompt=puzzle_text,
            reference=solution_text,
            privileged={"solution": solution_text},
            metadata={"puzzle": puzzle, "solution": solution, "size": self.config.size},
        )
        key = solution_text if self.config.split_by == "solution" else puzzle_text
        return key, task

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        return sample_split(
            lambda index: self._candidate(seed, index), n, split, self.name, self.config.eval_fraction
        )

    def reset(self, task: Task) -> EpisodeState:
        grid = [list(row) for row in task.metadata["puzzle"]]
        return EpisodeState(task=task, observation=task.prompt, data={"grid": grid})

    def _turn_limit(self, task: Task) -> int:
        if self.config.max_turns is not None:
            return self.config.max_turns
        empties = len(empty_positions(task.metadata["puzzle"]))
        return empties * (1 if self.config.illegal_move_ends_episode else 2)

    def step(self, state: EpisodeState, action: str) -> StepResult:
        if state.done:
            raise ValueError(f"episode of task {state.task.task_id} is already done")
        grid: Grid = [list(row) for row in state.data["grid"]]
        turn = state.turn + 1
        problem = self._illegal(grid, action)
        if problem is None:
            move = _MOVE.fullmatch(action.strip())
            assert move is not None
            row, col, digit = (int(group) for group in move.groups())
            grid[row - 1][col - 1] = digit
            if not empty_positions(grid):
                return self._finish(state, grid, turn, 1.0, "solved")
            if turn >= self._turn_limit(state.task):
                return self._finish(state, grid, turn, 0.0, f"turn limit {turn} reached")
            observation = "\n" + render(grid)
            return StepResult(
                EpisodeState(state.task, observation, turn, False, {"grid": grid}),
                observation,
                0.0,
                False,
                "ok",
            )
        if self.config.illegal_move_ends_episode or turn >= self._turn_limit(state.task):
            return self._finish(state, grid, turn, 0.0, problem)
        observation = "\nx\n" + render(grid)
        return StepResult(
            EpisodeState(state.task, observation, turn, False, {"grid": grid}),
            observation,
            0.0,
            False,
            problem,
        )

    def _illegal(self, grid: Grid, action: object) -> str | None:
        """Why the move is illegal, or None for a legal move."""
        if not isinstance(action, str):
            return f"illegal move: action must be text, got {type(action).__name__}"
        text = action.strip()
        shown = text[: self.max_action_chars]
        move = _MOVE.fullmatch(text) if len(text) <= self.max_action_chars else None
        if move is None:
            return f"illegal move {shown!r}: expected r<row>c<col>=<digit>"
        size = len(grid)
        row, col, digit = (int(group) for group in move.groups())
        if not (1 <= row <= size and 1 <= col <= size):
            return f"illegal move {text}: cell outside the {size}x{size} grid"
        if not 1 <= digit <= size:
            return f"illegal move {text}: digit must be 1-{size}"
        if grid[row - 1][col - 1]:
            return f"illegal move {text}: r{row}c{col} is already filled"
        reason = conflict(grid, row - 1, col - 1, digit)
        return None if reason is None else f"illegal move {text}: {reason}"

    def _finish(
        self, state: EpisodeState, grid: Grid, turn: int, reward: float, diagnostic: str
    ) -> StepResult:
        done_state = EpisodeState(state.task, "", turn, True, {"grid": grid})
        return StepResult(done_state, "", reward, True, diagnostic)

    def score(self, task: Task, completion: str) -> ScoreResult:
        """Replay a whole completion as whitespace-separated moves; 1 if they solve the puzzle."""
        text, problem = clean_completion(completion)
        if text is None:
            return ScoreResult(0.0, problem)
        state = self.reset(task)
        for move in text.split():
            result = self.step(state, move)
            state = result.state
            if result.done:
                return ScoreResult(result.reward, result.diagnostic)
        return ScoreResult(0.0, f"unsolved after {state.turn} moves")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        """Fill the empty cells from the solution in a random order (independent of ``max_turns``)."""
        solution: Grid = task.metadata["solution"]
        grid: Grid = [list(row) for row in task.metadata["puzzle"]]
        order = empty_positions(grid)
        rng.shuffle(order)
        turns: list[tuple[str, str]] = []
        observation = task.prompt
        for row, col in order:
            digit = solution[row][col]
            if self._illegal(grid, f"r{row + 1}c{col + 1}={digit}") is not None:
                raise RuntimeError(
                    f"task {task.task_id}: its solution breaks the rules at r{row + 1}c{col + 1}"
                )
            turns.append((observation, f"r{row + 1}c{col + 1}={digit}"))
            grid[row][col] = digit
            observation = "\n" + render(grid)
        return Demonstration(turns)
