"""Offline episodes with chosen responses, and explained variance at chosen states: the pieces of
the privileged-context probe (``tests/integration/critics/test_privileged_context.py``).

Rollouts of a policy decide their own responses; a probe of what a critic can read needs responses
of known quality instead (half right, half wrong), so :func:`offline_episodes` renders them the
way the rollout player does (the spec template's first prompt, the action and its EOS token),
scores them with the environment and attaches the critic's context with
:func:`~lecritique.critics.inputs.critic_queries`, the function the live run and ``critic
pretrain`` call. :func:`state_evs` measures the critic per state of the response, so a value that
can only be known once the answer is written is measured where it can be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lecritique.advantages import explained_variance
from lecritique.critics.inputs import Attempt, critic_queries
from lecritique.critics.specs import CriticServingSpec
from lecritique.critics.types import ActorInfo
from lecritique.envs.base import Environment, Task
from lecritique.models.templates import PromptTemplate
from lecritique.trajectory import Trajectory


def offline_episodes(
    environment: Environment,
    tasks: Sequence[Task],
    group_size: int,
    respond: Callable[[Task, int], str],
    template: PromptTemplate,
    tokenizer: Any,
    critic: CriticServingSpec,
) -> list[Trajectory]:
    """One group of ``group_size`` single-turn episodes per task (``respond(task, member)`` writes
    each response), scored by ``environment``, each carrying the critic's context for ``critic``."""
    if tokenizer.eos_token_id is None:
        raise ValueError("tokenizer: it has no eos_token; a response must end with one")
    attempts = []
    for group, task in enumerate(tasks):
        prompt_ids = np.asarray(tokenizer.encode(template.initial(task.prompt), add_special_tokens=True))
        for member in range(group_size):
            response = respond(task, member)
            result = environment.score(task, response)
            token_ids = np.asarray(
                [*tokenizer.encode(response, add_special_tokens=False), tokenizer.eos_token_id]
            )
            trajectory = Trajectory(
                trajectory_id=f"g{group}-m{member}",
                task_id=task.task_id,
                group_id=group,
                prompt_ids=prompt_ids,
                token_ids=token_ids,
                policy_mask=np.ones(token_ids.shape[0], dtype=bool),
                logprobs=np.zeros(token_ids.shape[0]),
                step_ids=np.zeros(token_ids.shape[0], dtype=np.int64),
                reward=result.reward,
                policy_version=0,
            )
            attempts.append(Attempt(trajectory, response, task.privileged, result.diagnostic))
    return [query.trajectory for query in critic_queries(critic, attempts, tokenizer, ActorInfo())]


def state_evs(
    values: Sequence[np.ndarray], trajectories: Sequence[Trajectory], states: Sequence[int]
) -> dict[int, float]:
    """Explained variance of V(h_t) against the returns at each state ``t`` in ``states``, indexed
    as Python sequences (0: before the first response token; -1: the last state, after every
    token but the final EOS), over the trajectories long enough to have it."""
    evs = {}
    for state in states:
        pairs = [
            (float(v[state]), t.reward)
            for v, t in zip(values, trajectories, strict=True)
            if -len(v) <= state < len(v)
        ]
        predicted, returns = (np.asarray(column, dtype=np.float64) for column in zip(*pairs, strict=True))
        evs[state] = float(explained_variance(predicted, returns))
    return evs


DIGITS_ALPHABET = "0123456789:. abcdefghijklmnopqrstuvwxyz\n"
"""The probe critic's characters: digits, the layouts' punctuation and role names."""

CHAT_TEMPLATE = (
    "{% for message in messages %}<bos>{{ message['role'] }}\n{{ message['content'] }}<eos>\n{% endfor %}"
    "{% if add_generation_prompt %}<bos>assistant\n{% endif %}"
)
"""A ChatML-like template over the probe's character vocabulary, with <eos> closing every turn."""


def half_right(seed: int) -> Callable[[Task, int], str]:
    """Responses that are the hidden string with probability 1/2, else another string as long."""
    import random

    rng = random.Random(seed)

    def write(task: Task, member: int) -> str:
        hidden = str(task.privileged["hidden"])
        if rng.random() < 0.5:
            return hidden
        while (other := "".join(rng.choice("0123456789") for _ in hidden)) == hidden:
            pass
        return other

    return write
