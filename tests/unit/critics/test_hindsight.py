"""Hindsight critics and baseline estimators (Le Critique eq. 5): refused, or scored on the prefix only."""

import pytest

from lecritique.advantages import estimator_class, estimator_classes
from lecritique.config import SpecError, parse_spec
from lecritique.critics.config import FrozenLLMConfig
from lecritique.critics.frozen_llm import FrozenLLMCritic
from lecritique.critics.kinds import critic_kind
from lecritique.critics.prompts import PeerText, frozen_messages
from lecritique.critics.specs import FrozenLLMCriticSpec
from lecritique.critics.states import trajectory_states
from lecritique.critics.types import ActorInfo, CriticQuery, Peer
from tests.unit.critics.conftest import text_trajectory

PREFIX_ESTIMATORS = [cls.name for cls in estimator_classes() if cls.needs_prefix_values()]

BASE = {
    "name": "unit",
    "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
    "policy": {"tiny": "sudoku-mini"},
}


@pytest.mark.parametrize("estimator", sorted(PREFIX_ESTIMATORS))
def test_a_hindsight_frozen_critic_is_refused_by_baseline_estimators(estimator):
    with pytest.raises(SpecError, match=r"critic\.hindsight.*estimator\.name") as error:
        parse_spec({**BASE, "critic": {"kind": "frozen_llm"}, "estimator": {"name": estimator}})
    assert "eq. 5" in str(error.value)


@pytest.mark.parametrize("estimator", sorted(PREFIX_ESTIMATORS))
def test_a_prefix_only_frozen_critic_feeds_baseline_estimators(estimator):
    parsed = parse_spec(
        {**BASE, "critic": {"kind": "frozen_llm", "hindsight": False}, "estimator": {"name": estimator}}
    )
    assert parsed.critic.hindsight is False


def test_lvrl_keeps_hindsight_values_and_the_rule_lives_in_the_registry():
    assert parse_spec(
        {**BASE, "critic": {"kind": "frozen_llm"}, "estimator": {"name": "lvrl"}}
    ).critic.hindsight
    critic = FrozenLLMCriticSpec()
    assert critic_kind(critic).refusal(critic, estimator_class("gae")) is not None
    assert critic_kind(critic).refusal(critic, estimator_class("lvrl")) is None


@pytest.fixture()
def three_states(ascii_tokenizer):
    # "It is 4. " | "Sure" | turn 2 "yes": three states at the sentence starts (a final stop
    # would make the closing EOS a state of its own: the start is decided before it is seen).
    trajectory = text_trajectory(ascii_tokenizer, "2+2=?", ["It is 4. Sure", "yes"], 1.0, name="a")
    return CriticQuery(trajectory, peers=(Peer("b", "five", 0.0),))


def test_a_prefix_chat_shows_no_segment_from_its_state_on(ascii_tokenizer, three_states):
    text = trajectory_states(three_states.trajectory, ascii_tokenizer, "sentence", 16)
    segments = [" ".join(state.segment_text.split()) for state in text.states]
    assert segments == ["It is 4.", "Sure ok", "yes"]  # the observation belongs to the segment before it
    config = FrozenLLMConfig(hindsight=False)
    for k in range(3):
        chat = frozen_messages(config, text, [PeerText("five", 0.0)], upto=k)[1]["content"]
        assert all(segment in chat for segment in segments[:k])
        assert not any(segment in chat for segment in segments[k:]), (k, chat)
        assert f"'{k}: p'" in chat
    hindsight = frozen_messages(FrozenLLMConfig(), text, [])[1]["content"]
    assert all(segment in hindsight for segment in segments)


class _Scripted(FrozenLLMCritic):
    """The frozen critic with a scripted LLM: records every chat, answers each state's line."""

    def __init__(self, config, policy_dir):
        self.config = config
        self.experiment = ""
        from lecritique.models.policy import load_tokenizer

        self.policy_tokenizer = load_tokenizer(policy_dir)
        self.generator = self.client = None
        self.chats = []

    def _answer(self, chats):
        self.chats += chats
        answers = []
        for chat in chats:
            content = chat[1]["content"]
            asked = [k for k in range(8) if f"'{k}: p'" in content]
            answers.append(f"{asked[0]}: 0.{asked[0] + 1}" if asked else "0: 0.1\n1: 0.2\n2: 0.3")
        return answers, {}


def test_prefix_mode_asks_once_per_state_and_keeps_each_answer(ascii_model, three_states):
    critic = _Scripted(FrozenLLMConfig(hindsight=False, segments={"rule": "sentence"}), ascii_model)
    result = critic.values([three_states], ActorInfo("x", 0.5))
    assert len(critic.chats) == 3 and result.stats["fallback_states"] == 0
    starts = trajectory_states(
        three_states.trajectory, critic.policy_tokenizer, "sentence", 16
    ).starts.tolist()
    assert [float(result.values[0][s]) for s in starts] == pytest.approx([0.1, 0.2, 0.3])
    hindsight = _Scripted(FrozenLLMConfig(segments={"rule": "sentence"}), ascii_model)
    hindsight.values([three_states], ActorInfo("x", 0.5))
    assert len(hindsight.chats) == 1


def test_critic_eval_scores_frozen_critics_on_the_prefix_unless_the_spec_says_hindsight():
    from lecritique.critic_eval.config import EvaluatedCritic
    from lecritique.critic_eval.evaluation import CriticEvalResult
    from lecritique.critic_eval.report import table_rows
    from lecritique.critics.config import SegmentsConfig

    segments = SegmentsConfig(rule="turn")
    default = EvaluatedCritic(name="lvrl", critic={"kind": "frozen_llm"})
    explicit = EvaluatedCritic(name="lvrl-h", critic={"kind": "frozen_llm", "hindsight": True})
    vf = EvaluatedCritic(name="vf", critic={"kind": "discriminative"})
    assert default.scored_critic(segments).hindsight is False and default.scored_on(segments) == "prefix"
    assert explicit.scored_critic(segments).hindsight is True and explicit.scored_on(segments) == "hindsight"
    assert vf.scored_on(segments) == "prefix"
    result = CriticEvalResult(
        {"lvrl": {}, "lvrl-h": {}}, [], [], 0.0, 0.5, scored_on={"lvrl": "prefix", "lvrl-h": "hindsight"}
    )
    header, rows = table_rows(result)
    assert header[1] == "scored on" and [row[1] for row in rows] == ["prefix", "hindsight"]
