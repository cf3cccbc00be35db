"""BabyAI as text: describer, optimal plans, the BabyAI bot as an independent solver, splits."""

from __future__ import annotations

import json
import random
import re

import pytest
from minigrid.utils.baby_ai_bot import BabyAIBot

from lecritique.envs import EpisodeState, get_environment
from lecritique.envs.babyai_text import ACTIONS, _make_level, _reset, describe_view

_THING = re.compile(
    r"an? (?:(open|closed|locked) )?(\w+) (ball|box|key|door|wall)"
    r"(?: (\d+) steps? (left|right))?(?: and)?(?: (\d+) steps? forward)?"
)


@pytest.fixture(scope="module")
def env():
    return get_environment("babyai_text")


@pytest.fixture(scope="module")
def tasks(env):
    return env.sample_tasks(12, split="train", seed=0)


def test_shortest_solution_accomplishes_the_mission(env, tasks):
    for task in tasks:
        assert re.match(
            r"Mission: pick up (a|the) \w+ (ball|box|key)\.\n", task.prompt
        ) and task.prompt.endswith("\nAction: ")
        demo = env.demonstrations(task, random.Random(0))
        assert len(demo.turns) == task.metadata["optimal_actions"]
        assert demo.turns[0][0] == task.prompt
        assert all(action in ACTIONS for _, action in demo.turns)
        assert task.metadata["door_distance"] == sum(a == "toggle" for _, a in demo.turns)
        assert env.score(task, "\n".join(a for _, a in demo.turns)).reward == 1.0
        assert set(task.privileged) == {"solution", "map"} and "##" in task.privileged["map"]


def test_babyai_bot_solves_through_the_text_interface_never_faster(env, tasks):
    for task in tasks[:6]:
        level = _make_level(env.config)
        _reset(level, task.metadata["seed"])
        bot = BabyAIBot(level)
        state = env.reset(task)
        for _ in range(env.config.max_steps):
            action = int(bot.replan())
            level.step(action)
            result = env.step(state, ACTIONS[action])
            state = result.state
            if result.done:
                break
        assert result.reward == 1.0, result.diagnostic
        assert state.turn >= task.metadata["optimal_actions"]


def test_describer_matches_the_map(env, tasks):
    checked = 0
    for task in tasks[:6]:
        level = _make_level(env.config)
        _reset(level, task.metadata["seed"])
        for action in [ACTIONS.index(a) for _, a in env.demonstrations(task, random.Random(0)).turns][:-1]:
            level.step(action)
            text = describe_view(level)
            (ax, ay), direction = level.agent_pos, level.agent_dir
            forward_vec = [(1, 0), (0, 1), (-1, 0), (0, -1)][direction]
            right_vec = (-forward_vec[1], forward_vec[0])
            for state, color, kind, side, side_word, forward in _THING.findall(text.split(".")[0]):
                if kind == "wall":
                    continue
                lateral = int(side or 0) * (1 if side_word == "right" else -1)
                ahead = int(forward or 0)
                x = ax + ahead * forward_vec[0] + lateral * right_vec[0]
                y = ay + ahead * forward_vec[1] + lateral * right_vec[1]
                cell = level.grid.get(x, y)
                assert cell is not None and (cell.type, cell.color) == (kind, color), (text, x, y)
                if kind == "door":
                    assert state == ("open" if cell.is_open else "closed")
                checked += 1
    assert checked > 50


def test_invalid_actions_and_step_budget():
    env = get_environment("babyai_text", max_steps=3)
    task = env.sample_tasks(1, seed=1)[0]
    state = env.reset(task)
    result = env.step(state, "fly away")
    assert (
        not result.done and "Invalid action" in result.observation and "invalid action" in result.diagnostic
    )
    result = env.step(result.state, "turn left")
    assert not result.done and result.observation.startswith("\nObservation: You see")
    result = env.step(result.state, "Turn Left ")
    assert result.done and result.reward == 0.0 and "budget" in result.diagnostic


def test_state_is_json_and_steps_on_another_replica(env, tasks):
    task = tasks[0]
    actions = [a for _, a in env.demonstrations(task, random.Random(0)).turns]
    state = env.reset(task)
    for action in actions[:5]:
        state = env.step(state, action).state
    revived = EpisodeState(
        task, state.observation, state.turn, state.done, json.loads(json.dumps(state.data))
    )
    replica = get_environment("babyai_text")
    expected = env.step(state, actions[5])
    replayed = replica.step(revived, actions[5])
    assert replayed.observation == expected.observation and replayed.state.data == expected.state.data


def test_seed_range_splits_and_determinism(env):
    train = env.sample_tasks(40, split="train", seed=0)
    evals = env.sample_tasks(40, split="eval", seed=0)
    low, high = env.config.eval_seeds
    assert all(low <= t.metadata["seed"] < high for t in evals)
    assert all(env.config.train_seeds[0] <= t.metadata["seed"] < env.config.train_seeds[1] for t in train)
    assert not {t.privileged["map"] for t in train} & {t.privileged["map"] for t in evals}
    assert {t.metadata["door_distance"] for t in train} <= {1, 2, 3}
    assert [t.task_id for t in env.sample_tasks(5, seed=3)] == [
        t.task_id for t in env.sample_tasks(5, seed=3)
    ]
    # Not a constant: the tasks differ from each other and under another seed.
    assert len({t.task_id for t in env.sample_tasks(5, seed=3)}) > 1
    assert [t.task_id for t in env.sample_tasks(5, seed=4)] != [
        t.task_id for t in env.sample_tasks(5, seed=3)
    ]
    only_two = get_environment("babyai_text", door_distances=[2]).sample_tasks(5, seed=0)
    assert {t.metadata["door_distance"] for t in only_two} == {2}
    with pytest.raises(ValueError, match="overlap"):
        get_environment("babyai_text", train_seeds=[0, 100], eval_seeds=[50, 200])
