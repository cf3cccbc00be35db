"""The in-run critic probe (``critic_probe``) on a synthetic task whose state values are known.

An action is two characters and EOS: the first is '1' with the task's probability p, the second
with probability 1/2, and the episode succeeds on '11'. So V(prompt) = p/2, V(after c1) =
[c1 = 1]/2, V(after c2) = [c1 c2 = 11]. A critic that answers these exact values (the Monte-Carlo
mean, without its noise) must score the ceiling within the bootstrap error; a constant one nothing."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from lecritique.config import SpecError, parse_spec
from lecritique.config.probe import CriticProbeSpec
from lecritique.critics.types import ActorInfo
from lecritique.engines.base import SamplingParams
from lecritique.envs.base import EpisodeState, StepResult, Task
from lecritique.episodes import EpisodePlayer, SampledAction
from lecritique.models.char_tokenizer import build_char_tokenizer
from lecritique.models.templates import build_template
from lecritique.orchestrator.probe import CriticProbe

TOKENIZER = build_char_tokenizer("0123456789.:")
EOS = TOKENIZER.eos_token_id


def split(ids: Sequence[int]) -> tuple[float, str]:
    """(p, the action's characters so far) of a conversation."""
    prompt, _, action = TOKENIZER.decode(list(ids), skip_special_tokens=True).partition(":")
    return float(prompt), action


class Policy:
    def sample(self, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[list[SampledAction]]:
        rng = np.random.default_rng(sampling.seed)
        out = []
        for prompt in prompts:
            p, partial = split(prompt)
            actions = []
            for _ in range(n):
                chars = partial
                if len(chars) == 0:
                    chars += "1" if rng.random() < p else "0"
                if len(chars) == 1:
                    chars += "1" if rng.random() < 0.5 else "0"
                ids = [*TOKENIZER.encode(chars[len(partial) :], add_special_tokens=False), EOS]
                actions.append(SampledAction(ids, [0.0] * len(ids)))
            out.append(actions)
        return out


class Environment:
    def sample_tasks(self, n: int, split: str, seed: int) -> list[Task]:
        assert split == "eval"
        rng = np.random.default_rng(seed)
        return [Task(f"t{seed}-{i}", f"{p:.2f}:", None, {}) for i, p in enumerate(rng.uniform(0.0, 1.0, n))]

    def reset(self, tasks: Sequence[Task]) -> list[EpisodeState]:
        return [EpisodeState(task, task.prompt) for task in tasks]

    def step(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]:
        return [StepResult(state, "", float(action == "11"), True, "") for state, action in items]


class ExactCritic:
    """V(h_t) of the synthetic task: the expectation Monte-Carlo continuations estimate."""

    def __init__(self, constant: float | None = None) -> None:
        self.constant = constant

    def evaluate(self, queries, prompt_texts, actor):
        values = []
        for query in queries:
            trajectory = query.trajectory
            p, action = split([*trajectory.prompt_ids, *trajectory.token_ids])
            exact = [p / 2, 0.5 * (action[0] == "1"), float(action == "11")]
            values.append(np.array(exact if self.constant is None else [self.constant] * 3, dtype=np.float32))
        return values, 7, {}


def probe(critic: ExactCritic, states: int = 96, continuations: int = 8) -> CriticProbe:
    spec = parse_spec(
        {
            "name": "probe",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
            "policy": {"path": "/unused"},
            "critic": {"context": "none"},
            "critic_probe": {"every": 5, "states": states, "continuations": continuations},
        }
    )
    player = EpisodePlayer(
        Policy(),
        Environment(),
        TOKENIZER,
        build_template("plain"),
        SamplingParams(max_tokens=3),
        max_context_tokens=64,
    )
    assert spec.critic_probe is not None
    return CriticProbe(
        spec.critic_probe,
        spec.critic,
        player,
        Environment(),
        critic,
        lambda: ActorInfo("synthetic", 0.5),
        group_size=4,
        seed=0,
    )


def test_a_critic_equal_to_the_monte_carlo_mean_scores_the_ceiling_within_the_bootstrap_error():
    exact = probe(ExactCritic()).run(step=5)
    assert (
        exact["probe_states"] == 96
        and exact["probe_continuations"] == 8
        and exact["probe_value_version"] == 7
    )
    assert exact["probe_ceiling"] > 0.3  # most of the variance is decided by the state
    assert abs(exact["probe_critic_ev"] - exact["probe_ceiling"]) <= 2 * exact["probe_ceiling_se"]
    assert (
        abs(exact["probe_ceiling_fraction"] - 1.0) <= 2 * exact["probe_ceiling_se"] / exact["probe_ceiling"]
    )
    flat = probe(ExactCritic(constant=0.3)).run(step=5)
    assert flat["probe_ceiling"] == exact["probe_ceiling"]  # the same states and continuations
    assert flat["probe_ceiling_fraction"] < 0.1
    assert exact["probe_ceiling"] - flat["probe_critic_ev"] > 4 * exact["probe_ceiling_se"]


def test_it_is_due_every_n_steps_and_off_by_default():
    assert [step for step in range(1, 16) if probe(ExactCritic()).due(step)] == [5, 10, 15]
    base = {
        "name": "p",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": "/x"},
    }
    assert parse_spec({**base, "critic": {}}).critic_probe is None
    with pytest.raises(SpecError, match="critic_probe: needs a critic"):
        parse_spec({**base, "estimator": {"name": "mean"}, "critic_probe": {}})
    with pytest.raises(SpecError, match="continuations"):
        parse_spec({**base, "critic": {}, "critic_probe": {"continuations": 1}})
    assert CriticProbeSpec().every == 25
