"""What critics are shown: privileged contexts, group peers, and the one function that assembles them."""

import numpy as np
import pytest

from lecritique.critics.icc import ACTOR_KEY, REWARD_AVERAGE_KEY
from lecritique.critics.inputs import (
    CONTEXT_KIND_KEY,
    Attempt,
    GroupMember,
    build_group_contexts,
    critic_queries,
    shown_on,
)
from lecritique.critics.specs import DiscriminativeCriticSpec, FrozenLLMCriticSpec
from lecritique.critics.types import ActorInfo
from lecritique.trajectory import Trajectory


def members(n=3):
    return [
        GroupMember(
            f"t{i}", response_text=f"answer-{i}", reward=float(i % 2), privileged={"solution": "1234"}
        )
        for i in range(n)
    ]


def test_none_context_is_empty():
    assert build_group_contexts("none", members()) == ["", "", ""]


def test_reference_context_carries_the_privileged_text():
    contexts = build_group_contexts("reference", members())
    assert all("1234" in c for c in contexts)
    with pytest.raises(ValueError, match="'answer' not in"):
        build_group_contexts("reference", members(), privileged_key="answer")
    bare = [GroupMember("t", "x", 1.0, {})]
    with pytest.raises(ValueError, match="has none"):
        build_group_contexts("reference", bare)


def test_loo_group_never_contains_the_trajectory_itself():
    group = members(4)
    contexts = build_group_contexts("loo_group", group)
    for i, context in enumerate(contexts):
        assert f"answer-{i}" not in context
        for j in range(4):
            if j != i:
                assert f"answer-{j}" in context
                assert f"peer {group[j].reward:.2f}:answer-{j}" in context
    with pytest.raises(ValueError, match="at least 2"):
        build_group_contexts("loo_group", group[:1])


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="'oracle'"):
        build_group_contexts("oracle", members())


def test_loo_group_keeps_one_line_per_peer():
    group = [GroupMember(f"t{i}", f"a\nb{i}", 1.0, {}) for i in range(3)]
    for context in build_group_contexts("loo_group", group):
        assert context.count("\n") == 2 and "a b" in context


# ---- critic_queries: what the orchestrator and critic-eval show every critic ------------------


class CharTokenizer:
    """One id per character: the context's ids spell the context."""

    def encode(self, text, add_special_tokens=True):
        assert not add_special_tokens
        return [ord(ch) for ch in text]


def trajectory(name, group, reward):
    return Trajectory(
        trajectory_id=name,
        task_id=f"task{group}",
        group_id=group,
        prompt_ids=np.array([1]),
        token_ids=np.array([5, 6]),
        policy_mask=np.array([True, True]),
        logprobs=np.zeros(2),
        step_ids=np.zeros(2),
        reward=reward,
        policy_version=0,
        metadata={"diagnostic": "x"},
    )


def attempts():
    """Two interleaved groups: ids a0, b0, a1, b1 (groups 0, 1, 0, 1)."""
    return [
        Attempt(
            trajectory(f"{'ab'[i % 2]}{i // 2}", i % 2, float(i // 2)),
            f"said {i}",
            {"solution": f"sol{i % 2}"},
            f"end {i}",
        )
        for i in range(4)
    ]


ACTOR = ActorInfo("1.0M llama", 0.25)


def test_loo_group_queries_show_each_trajectory_only_its_siblings():
    queries = critic_queries(
        DiscriminativeCriticSpec(context="loo_group"), attempts(), CharTokenizer(), ACTOR
    )
    assert [q.trajectory.trajectory_id for q in queries] == ["a0", "b0", "a1", "b1"]
    for index, query in enumerate(queries):
        sibling = index ^ 2  # the other member of the same group
        assert f"said {sibling}" in query.context_text and f"said {index}" not in query.context_text
        assert [p.trajectory_id for p in query.peers] == [queries[sibling].trajectory.trajectory_id]
        assert query.peers[0].reward == float(sibling // 2) and "end" in query.peers[0].summary
        assert "".join(map(chr, query.trajectory.critic_context_ids)) == query.context_text
        assert query.trajectory.metadata == {
            "diagnostic": "x",
            CONTEXT_KIND_KEY: "loo_group",
            ACTOR_KEY: "1.0M llama",
            REWARD_AVERAGE_KEY: 0.25,
        }


def test_reference_and_none_contexts_and_the_kinds_peer_length():
    reference = critic_queries(
        DiscriminativeCriticSpec(context="reference"), attempts(), CharTokenizer(), ACTOR
    )
    assert [q.context_text for q in reference] == ["ref:sol0\n", "ref:sol1\n", "ref:sol0\n", "ref:sol1\n"]
    plain = critic_queries(FrozenLLMCriticSpec(max_peer_chars=4), attempts(), CharTokenizer(), ACTOR)
    assert all(q.context_text == "" and q.trajectory.critic_context_ids is None for q in plain)
    assert all(len(p.summary) <= 4 for q in plain for p in q.peers)


def test_a_continuation_is_shown_what_its_episode_is_shown():
    query = critic_queries(DiscriminativeCriticSpec(context="reference"), attempts(), CharTokenizer(), ACTOR)[
        0
    ]
    continued = shown_on(query, trajectory("later", 0, 1.0))
    assert continued.trajectory.trajectory_id == "later" and continued.context_text == query.context_text
    np.testing.assert_array_equal(
        continued.trajectory.critic_context_ids, query.trajectory.critic_context_ids
    )
    assert continued.peers == query.peers
