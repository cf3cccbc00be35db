"""Critic prompts: frozen-LLM answers, group context, In-Context Conditioning."""

import json

import numpy as np
import pytest
from pydantic import ValidationError

from lecritique.critics.config import FrozenLLMConfig, GenerativeCriticConfig
from lecritique.critics.icc import RewardAverage
from lecritique.critics.inputs import GroupMember, build_group_peers, peer_summary
from lecritique.critics.prompts import (
    PeerText,
    describe_actor,
    frozen_messages,
    generative_prompt,
    parse_state_values,
    scored_text,
)
from lecritique.critics.states import CriticState, TrajectoryText


def test_state_values_are_read_per_line_and_missing_ones_are_none():
    answer = "0: 0.5\n[1]: 0.25\nstate 2 is hard\n2 = 1\n"
    assert parse_state_values(answer, 4) == [0.5, 0.25, 1.0, None]


def test_out_of_range_duplicate_and_unknown_states_are_ignored():
    answer = "0: 1.5\n1: 0.4\n1: 0.9\n7: 0.3\n2: -0.1"
    assert parse_state_values(answer, 3) == [None, 0.4, None]
    assert parse_state_values("", 2) == [None, None]


def test_group_peers_never_contain_the_trajectory_itself():
    members = [
        GroupMember(f"t{i}", f"move {i}", float(i % 2), {}, outcome="solved" if i % 2 else "illegal move")
        for i in range(4)
    ]
    peers = build_group_peers(members, max_summary_chars=40)
    for i, group in enumerate(peers):
        assert [p.trajectory_id for p in group] == [f"t{j}" for j in range(4) if j != i]
        assert all(f"move {i}" not in p.summary for p in group)
        assert [p.reward for p in group] == [float(j % 2) for j in range(4) if j != i]


def test_peer_summary_keeps_the_outcome_when_the_actions_are_long():
    member = GroupMember("t", "x" * 500, 0.0, {}, outcome="illegal move r2c3=4")
    summary = peer_summary(member, max_chars=60)
    assert len(summary) == 60
    assert summary.endswith("=> illegal move r2c3=4")


def test_frozen_prompt_shows_peers_states_and_no_own_reward():
    text = TrajectoryText(
        prompt_text="2.43\n4312\n",
        context_text="",
        states=[CriticState(0, 0, "", "r1c2=1"), CriticState(1, 8, "r1c2=1\n", "r3c2=2")],
        starts=np.array([0, 8]),
    )
    peers = [PeerText("r1c2=1 => solved", 1.0), PeerText("r1c2=3 => illegal move", 0.0)]
    system, user = frozen_messages(FrozenLLMConfig(), text, peers)
    assert system["role"] == "system" and user["role"] == "user"
    content = user["content"]
    assert "mean reward 0.50" in content
    assert "- reward 1.00: r1c2=1 => solved" in content
    assert "[0] r1c2=1" in content and "[1] r3c2=2" in content
    assert "k = 0..1" in content


def test_generative_prompt_carries_in_context_conditioning():
    config = GenerativeCriticConfig()
    prompt = generative_prompt(
        config, context="ref:1234\n", actor="0.5M llama", reward_average=0.375, prompt="2.43", prefix="r1c2=1"
    )
    assert prompt.startswith("ref:1234\nactor: 0.5M llama, avg reward 0.38")
    assert "so far: r1c2=1" in prompt and prompt.rstrip().endswith("score:N")
    # ICC part (a): the critic is told to infer the actor's ability from the partial response.
    assert "so far: r1c2=1\ninfer the actor's ability from its response so far" in prompt
    direct = GenerativeCriticConfig(reasoning=False)
    assert generative_prompt(
        direct, context="", actor="a", reward_average=0, prompt="p", prefix="x"
    ).endswith("\nscore:")
    assert scored_text(direct, "7") == "score:7"
    assert scored_text(config, "so score:7") == "so score:7"
    with pytest.raises(ValidationError, match="unknown or malformed placeholder"):
        GenerativeCriticConfig(prompt_template="{context} {actorr}")


def test_actor_description_reads_the_policy_config(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 128,
                "num_hidden_layers": 2,
                "vocab_size": 100,
                "intermediate_size": 512,
            }
        )
    )
    assert describe_actor(tmp_path) == "0.5M llama"
    assert describe_actor(tmp_path / "missing") == "unknown policy"


def test_reward_average_starts_from_the_first_batch_then_smooths():
    average = RewardAverage(decay=0.5, value=0.5)
    assert average.value == 0.5
    assert average.update(1.0) == 1.0
    assert average.update(0.0) == pytest.approx(0.5)
    assert average.update(0.0) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="decay"):
        RewardAverage(decay=1.0, value=0.0)


def test_the_frozen_prompt_of_a_trajectory_never_shows_its_own_reward():
    """Through the path the orchestrator takes: critic_queries builds the peers, the prompt reads them."""
    from lecritique.critics.inputs import critic_queries
    from lecritique.critics.specs import FrozenLLMCriticSpec
    from lecritique.critics.types import ActorInfo
    from tests.unit.critics.test_inputs import CharTokenizer, attempts

    group = [a for a in attempts() if a.trajectory.group_id == 0]  # a0, a1
    rewards = [0.73, 0.19]
    import dataclasses

    group = [
        dataclasses.replace(a, trajectory=dataclasses.replace(a.trajectory, reward=r))
        for a, r in zip(group, rewards, strict=True)
    ]
    queries = critic_queries(FrozenLLMCriticSpec(), group, CharTokenizer(), ActorInfo("a", 0.5))
    text = TrajectoryText("task", "", [CriticState(0, 0, "", "move")], np.array([0]))
    for own, other, query in zip(rewards, rewards[::-1], queries, strict=True):
        content = frozen_messages(
            FrozenLLMConfig(), text, [PeerText(p.summary, p.reward) for p in query.peers]
        )[1]["content"]
        assert f"{own:.2f}" not in content, content
        assert f"- reward {other:.2f}:" in content and f"mean reward {other:.2f}" in content
