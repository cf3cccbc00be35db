"""Fixtures of the critic tests: a tiny random policy whose tokenizer covers printable ASCII (random
weights, written in seconds: no build; the integration tier shares them, tests/integration/conftest.py)."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np
import pytest

from lecritique.models.policy import load_tokenizer
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
from lecritique.trajectory import Trajectory

ASCII = "".join(c for c in string.printable if c not in "\r\x0b\x0c")


@pytest.fixture(scope="session")
def ascii_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained tiny Llama over printable ASCII with a long context: text critics can read any prompt."""
    architecture = TinyArchitecture(
        hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128, max_positions=2048
    )
    return write_random_tiny_policy(
        tmp_path_factory.mktemp("ascii") / "model", ASCII, seed=3, architecture=architecture
    )


def text_trajectory(
    tokenizer, prompt: str, actions: list[str], reward: float, group_id: int = 0, name: str = "t"
) -> Trajectory:
    """A multi-turn trajectory: each action ends with EOS; observations "\\nok\\n" between turns."""
    ids, mask, steps = [], [], []
    for turn, action in enumerate(actions):
        if turn:
            observation = tokenizer.encode("\nok\n", add_special_tokens=False)
            ids += observation
            mask += [False] * len(observation)
            steps += [turn] * len(observation)
        action_ids = [*tokenizer.encode(action, add_special_tokens=False), tokenizer.eos_token_id]
        ids += action_ids
        mask += [True] * len(action_ids)
        steps += [turn] * len(action_ids)
    return Trajectory(
        trajectory_id=name,
        task_id="task",
        group_id=group_id,
        prompt_ids=np.asarray(tokenizer.encode(prompt, add_special_tokens=True)),
        token_ids=np.asarray(ids),
        policy_mask=np.asarray(mask),
        logprobs=np.zeros(len(ids)),
        step_ids=np.asarray(steps),
        reward=reward,
        policy_version=0,
    )


@pytest.fixture(scope="session")
def ascii_tokenizer(ascii_model: Path):
    return load_tokenizer(ascii_model)
