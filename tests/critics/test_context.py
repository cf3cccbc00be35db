import pytest

from lecritique.critics.context import GroupMember, build_group_contexts


def members(n=3):
    return [
        GroupMember(f"t{i}", response_text=f"answer-{i}", reward=float(i % 2), privileged={"solution": "1234"})
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
