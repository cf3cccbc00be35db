"""The episode player: multi-turn conversations built in token ids, rewards from env.step, one turn protocol."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from lecritique.engines.base import Completion, Prompts, SamplingParams
from lecritique.envs import get_environment
from lecritique.episodes import EpisodePlayer
from lecritique.episodes.local import EngineSampler, LocalEnvironment
from lecritique.models.char_tokenizer import build_char_tokenizer
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
        self.calls: list[tuple[int, int, int, int | None]] = []
        """(prompts, n, max_tokens, seed) of every call."""

    def generate(
        self, prompts: Prompts, n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        assert sampling is not None
        self.calls.append((len(prompts), n, sampling.max_tokens, sampling.seed))
        out = []
        for prompt in prompts:
            assert not isinstance(prompt, str)
            text = TOKENIZER.decode(prompt)
            self.prompts_seen.append(text)
            lines = [line for line in TOKENIZER.decode(prompt, skip_special_tokens=True).split("\n") if line]
            # A conversation cut inside an action ends with that action's first characters.
            partial = lines.pop() if lines[-1].startswith("r") else ""
            grid = [[0 if ch == "." else int(ch) for ch in line] for line in lines[-4:]]
            solution = solve(grid)
            r, c = next((r, c) for r in range(4) for c in range(4) if grid[r][c] == 0)
            move = f"r{r + 1}c{c + 1}={solution[r][c] % 4 + 1 if self.wrong else solution[r][c]}"
            assert move.startswith(partial)
            rest = move[len(partial) :]
            ids = [*TOKENIZER.encode(rest, add_special_tokens=False), TOKENIZER.eos_token_id]
            out.append([Completion(ids, [-0.1] * len(ids), rest, "stop") for _ in range(n)])
        return out

    def load_weights(self, version: int, path: str) -> None: ...

    def info(self) -> dict[str, Any]:
        return {}

    def close(self) -> None: ...


def player(engine: SolverEngine, max_context_tokens: int = 512, **options: Any) -> EpisodePlayer:
    return EpisodePlayer(
        EngineSampler(engine),
        LocalEnvironment(ENV),
        TOKENIZER,
        PlainTemplate(),
        SamplingParams(max_tokens=8),
        max_context_tokens,
        **options,
    )


def played(
    engine: SolverEngine, tasks: list[Any], max_context_tokens: int = 512, **options: Any
) -> list[Any]:
    episodes = player(engine, max_context_tokens, **options)
    records = episodes.start(tasks, 1)
    episodes.play(records)
    return records


def test_a_solving_policy_succeeds_turn_by_turn() -> None:
    tasks = ENV.sample_tasks(6, split="eval", seed=0)
    engine = SolverEngine()
    records = played(engine, tasks)
    for task, record in zip(tasks, records, strict=True):
        empties = task.prompt.count(".")
        assert record.task is task and record.reward == 1.0 and record.diagnostic == "solved"
        assert len(record.actions) == empties and all(
            a.startswith("r") and "<eos>" not in a for a in record.actions
        )
        text = TOKENIZER.decode(record.prompt_ids + record.token_ids)
        # <bos>grid act<eos>\ngrid act<eos>...: observations between turns, EOS after every action
        assert text.startswith("<bos>" + task.prompt) and text.endswith("<eos>")
        assert text.count("<eos>") == empties and text.count("\n") == 4 + 5 * (empties - 1)
        trajectory = record.trajectory("t")
        assert (
            trajectory.num_policy_tokens == sum(record.policy_mask)
            and trajectory.metadata["turns"] == empties
        )
        assert sorted(set(trajectory.step_ids)) == list(range(empties))
    # Turn t+1 is prompted with exactly the conversation so far (prefix-consistent token ids).
    first_turn = {p for p in engine.prompts_seen if p.count("<eos>") == 0}
    assert len(first_turn) == len(tasks)


def test_illegal_moves_end_episodes_with_reward_zero() -> None:
    records = played(SolverEngine(wrong=True), ENV.sample_tasks(4, split="eval", seed=1))
    assert all(
        r.reward == 0.0 and len(r.actions) == 1 and r.diagnostic.startswith("illegal move") for r in records
    )


def test_context_and_turn_limits_end_an_episode_with_reward_zero() -> None:
    tasks = ENV.sample_tasks(2, split="eval", seed=2)
    records = played(SolverEngine(), tasks, max_context_tokens=40)
    assert all(r.reward == 0.0 and r.diagnostic == "context limit reached" and r.actions for r in records)
    capped = played(SolverEngine(), tasks, max_turns=1)
    assert all(
        r.reward == 0.0 and r.diagnostic == "turn limit reached" and len(r.actions) == 1 for r in capped
    )


def test_groups_share_their_first_sampling_call_and_each_call_takes_the_next_seed() -> None:
    tasks = ENV.sample_tasks(3, split="eval", seed=3)
    engine = SolverEngine()
    seeds = iter(range(100, 200))
    records = player(engine).play_groups(tasks, 4, first_group_id=10, seeds=lambda: next(seeds))
    assert [(r.group_id, r.member) for r in records] == [(10 + g, m) for g in range(3) for m in range(4)]
    # First turn: one prompt per task with n = 4; later turns: one prompt per live member.
    assert engine.calls[0] == (3, 4, 8, 100)
    assert [call[1:] for call in engine.calls[1:]] == [
        (1, 8, 101 + turn) for turn in range(len(engine.calls) - 1)
    ]
    assert all(r.reward == 1.0 for r in records)


def test_a_cut_episode_finishes_its_action_and_plays_on() -> None:
    task = next(t for t in ENV.sample_tasks(20, split="eval", seed=4) if t.prompt.count(".") >= 2)
    (record,) = played(SolverEngine(), [task])
    second_turn_start = record.turn_starts[1]
    cut = record.cut(second_turn_start + 2)  # two tokens into the second action
    assert (
        cut.turn == 1
        and len(cut.partial_action()) == 2
        and cut.actions == record.actions[:1]
        and not cut.done
    )
    engine = SolverEngine()
    player(engine).play([cut])
    assert engine.calls[0][2] == 8 - 2  # the cut action keeps its own token budget
    assert cut.done and cut.reward == record.reward == 1.0 and cut.actions == record.actions
    assert cut.token_ids == record.token_ids and cut.step_ids == record.step_ids
    with pytest.raises(ValueError, match="not a policy token"):
        record.cut(second_turn_start - 1)  # an observation token
