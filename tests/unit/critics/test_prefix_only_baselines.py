"""Every critic kind feeds prefix-only baselines to every estimator that needs them (Le Critique eq. 5).

One property over every (critic configuration, estimator) pair the spec admits, where the
estimator needs prefix-only values: change the tokens of a trajectory at positions >= t, and
every value at positions <= t, and every advantage there, stays the same. The critics' own code
runs (segment starts, state texts, prompts, per-token value assignment, the discriminative
critic's value positions); only the model is a deterministic stand-in that hashes exactly the
input the real model would read, so any text the critic is shown about tokens >= t changes it.
LVRL is not covered: it admits hindsight values and its step advantages read later states by design.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lecritique.advantages import AdvantageBatch, estimator_classes
from lecritique.critics.frozen_llm import FrozenLLMCritic
from lecritique.critics.generative import GenerativeCritic
from lecritique.critics.kinds import critic_kind
from lecritique.critics.scoring import ParsedScore
from lecritique.critics.segments import SEGMENT_RULES
from lecritique.critics.specs import DiscriminativeCriticSpec, FrozenLLMCriticSpec, GenerativeCriticSpec
from lecritique.critics.types import ActorInfo, CriticQuery
from lecritique.training.collate import collate_critic
from lecritique.trajectory import Trajectory
from tests.unit.critics.conftest import text_trajectory

MAX_SEGMENTS = 3
BUDGET = 40
"""The response budget (``segments.max_length``) the spec would fill in; trajectories stay under it."""
ALPHABET = "ab3. !?\n"
"""Letters, a digit, stops, spaces and newlines: every boundary case of every segment rule."""


def _unit(*parts: object) -> float:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:4], "little") / 2**32


class _StandInGenerative(GenerativeCritic):
    """The generative critic with a model that scores a prompt by hashing it."""

    def __init__(self, config: GenerativeCriticSpec, tokenizer) -> None:  # no engine: the model is the hash
        self.config = config
        self.policy_tokenizer = tokenizer
        self.shown_group = False

    def score_states(self, prompts):
        return [[ParsedScore(_unit(prompt), None, None)] for prompt in prompts], {}, 0


class _StandInFrozen(FrozenLLMCritic):
    """The frozen LLM critic with an LLM that answers by hashing the chat it is sent."""

    def __init__(self, config: FrozenLLMCriticSpec, tokenizer) -> None:
        self.config = config
        self.policy_tokenizer = tokenizer

    def _answer(self, chats):
        answers = []
        for chat in chats:
            asked = re.search(r"succeeds from state (\d+)", chat[-1]["content"])
            states = [int(asked.group(1))] if asked else range(64)
            answers.append("\n".join(f"{k}: {_unit(chat, k):.6f}" for k in states))
        return answers, {}


def _discriminative_values(trajectory: Trajectory) -> np.ndarray:
    """The scalar-head critic's V(h_t) with a causal stand-in model: the head output at input
    position p hashes the inputs up to and including p, read at the batch's ``value_positions``."""
    batch = collate_critic([trajectory])
    ids = batch.input_ids[0].tolist()
    outputs = torch.tensor([[_unit(ids[: p + 1]) for p in range(len(ids))]])
    values = outputs.gather(1, batch.value_positions).numpy()[0]
    return values[: trajectory.token_ids.shape[0]]


CRITICS = {
    "discriminative": DiscriminativeCriticSpec(),
    **{
        f"generative-{rule}": GenerativeCriticSpec(
            segments={"rule": rule, "max_segments": MAX_SEGMENTS, "max_length": BUDGET}
        )
        for rule in SEGMENT_RULES
    },
    **{
        f"frozen_llm-{rule}{'-hindsight' if hindsight else ''}": FrozenLLMCriticSpec(
            hindsight=hindsight, segments={"rule": rule, "max_segments": MAX_SEGMENTS, "max_length": BUDGET}
        )
        for rule in SEGMENT_RULES
        for hindsight in (False, True)
    },
}
PAIRS = [
    (critic, estimator.name)
    for critic, spec in CRITICS.items()
    for estimator in estimator_classes()
    if estimator.needs_prefix_values() and critic_kind(spec).refusal(spec, estimator) is None
]


def test_every_kind_and_every_prefix_estimator_is_covered():
    kinds = {critic_kind(CRITICS[critic]).name for critic, _ in PAIRS}
    assert kinds == {"discriminative", "generative", "frozen_llm"}
    assert {estimator for _, estimator in PAIRS} == {"value", "gae", "tether", "evpo"}
    assert not [critic for critic, _ in PAIRS if critic.endswith("-hindsight")]  # refused by the spec


def _values(critic_name: str, trajectory: Trajectory, tokenizer) -> np.ndarray:
    spec = CRITICS[critic_name]
    if isinstance(spec, DiscriminativeCriticSpec):
        return _discriminative_values(trajectory)
    critic = (_StandInGenerative if isinstance(spec, GenerativeCriticSpec) else _StandInFrozen)(
        spec, tokenizer
    )
    return critic.values([CriticQuery(trajectory)], ActorInfo()).values[0]


@st.composite
def _turns(draw):
    return draw(st.lists(st.text(ALPHABET, min_size=1, max_size=12), min_size=1, max_size=2))


def _with_tokens_changed(trajectory: Trajectory, t: int, replacement: list[int]) -> Trajectory:
    token_ids = trajectory.token_ids.copy()
    token_ids[t:] = replacement[: token_ids.shape[0] - t]
    return dataclasses.replace(trajectory, token_ids=token_ids)


def _advantages(estimator_name: str, values: list[np.ndarray], mask: np.ndarray, fitted_on: AdvantageBatch):
    estimator = next(cls for cls in estimator_classes() if cls.name == estimator_name).Spec().build()
    estimator.update(fitted_on)  # some fitted state (TETHER's rho, EVPO's switch), as after a step
    batch = AdvantageBatch(rewards=[1.0, 0.0], mask=mask, group_ids=[0, 0], values=np.stack(values))
    return np.asarray(estimator.compute(batch))


@pytest.mark.parametrize(("critic", "estimator"), PAIRS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=_turns(), cut=st.integers(0, 1000), tail=st.text(ALPHABET, min_size=40, max_size=40))
def test_values_and_advantages_up_to_t_ignore_the_tokens_from_t_on(
    ascii_tokenizer, critic, estimator, turns, cut, tail
):
    trajectory = text_trajectory(ascii_tokenizer, "2+2=?", turns, 1.0, name="a")
    policy = np.flatnonzero(trajectory.policy_mask)
    t = int(policy[cut % policy.size])
    replacement = ascii_tokenizer.encode(tail, add_special_tokens=False)
    changed = _with_tokens_changed(trajectory, t, replacement)
    assume(not np.array_equal(changed.token_ids, trajectory.token_ids))
    before, after = _values(critic, trajectory, ascii_tokenizer), _values(critic, changed, ascii_tokenizer)
    np.testing.assert_array_equal(
        before[: t + 1], after[: t + 1], err_msg=f"V(h_s), s <= t = {t}, read tokens >= t"
    )

    # The same through the estimator: a peer (group of two), a state fitted on another batch.
    peer = text_trajectory(ascii_tokenizer, "2+2=?", ["It is 4."], 0.0, name="b")
    length = max(trajectory.token_ids.shape[0], peer.token_ids.shape[0])

    def padded(array, fill):
        return np.pad(np.asarray(array, dtype=float), (0, length - len(array)), constant_values=fill)

    mask = np.stack([padded(trajectory.policy_mask, 0), padded(peer.policy_mask, 0)]).astype(bool)
    peer_values = padded(_values(critic, peer, ascii_tokenizer), 0.0)
    rng = np.random.default_rng(0)
    fitted_on = AdvantageBatch(
        rewards=[1.0, 0.0], mask=mask, group_ids=[0, 0], values=rng.uniform(0.2, 0.8, mask.shape)
    )
    first = _advantages(estimator, [padded(before, 0.0), peer_values], mask, fitted_on)
    second = _advantages(estimator, [padded(after, 0.0), peer_values], mask, fitted_on)
    np.testing.assert_array_equal(first[0, : t + 1], second[0, : t + 1])
