"""The group context's sibling budget: whole responses by default, middles elided over budget,
the final answer always kept; and the context carrying both the reference and the group."""

import pytest

from lecritique.config import parse_spec
from lecritique.critics.inputs import (
    GroupMember,
    build_group_contexts,
    context_length,
    critic_queries,
    middle_out,
)
from lecritique.critics.specs import DiscriminativeCriticSpec
from lecritique.critics.types import ActorInfo
from tests.unit.critics.test_inputs import CharTokenizer, attempts


def long_group(n=4, filler=300):
    """Responses that start with their name, reason at length, and end with their answer."""
    return [
        GroupMember(
            f"t{i}", f"START{i} " + "x" * filler + f" ANSWER={i}{i}", float(i % 2), {"solution": "1234"}
        )
        for i in range(n)
    ]


def test_whole_sibling_responses_are_kept_by_default():
    group = long_group()
    for i, context in enumerate(build_group_contexts("loo_group", group)):
        for j, member in enumerate(group):
            assert (member.response_text in context) == (j != i)


def test_a_sibling_over_its_budget_keeps_its_start_and_final_answer():
    assert middle_out("abcdefghijklmnopqrstuvwxyz", 11) == "abcd...wxyz"
    context = build_group_contexts("loo_group", long_group(2), sibling_chars=24)[0]
    response = context.removeprefix("peer 1.00:").rstrip("\n")
    assert (
        len(response) == 24
        and response.startswith("START1")
        and response.endswith("ANSWER=11")
        and "..." in response
    )


def test_a_total_budget_shortens_every_sibling_evenly_and_keeps_all_answers():
    contexts = build_group_contexts("loo_group", long_group(4), max_context_chars=150)
    for i, context in enumerate(contexts):
        assert len(context) <= 150
        lines = context.splitlines()
        assert len(lines) == 3  # every sibling survives, not just the first ones
        assert all(
            line.endswith(f"ANSWER={j}{j}")
            for line, j in zip(lines, [j for j in range(4) if j != i], strict=True)
        )


def test_the_token_bound_fits_the_context_and_defaults_to_half_the_models_length(ascii_model):
    members = long_group(3)
    attempts_ = attempts()
    long = [
        type(a)(a.trajectory, m.response_text, a.privileged)
        for a, m in zip(attempts_, [*members, members[0]], strict=True)
    ]
    critic = DiscriminativeCriticSpec(context="loo_group", max_context_tokens=60)
    for query in critic_queries(critic, long, CharTokenizer(), ActorInfo()):
        assert 40 < len(query.trajectory.critic_context_ids) <= 60
        assert "ANSWER=" in query.context_text
    import json

    from lecritique.models.policy import load_tokenizer

    length = json.loads((ascii_model / "config.json").read_text())["max_position_embeddings"]
    assert context_length(load_tokenizer(ascii_model), DiscriminativeCriticSpec()) == length // 2
    assert context_length(CharTokenizer(), DiscriminativeCriticSpec()) is None


def test_reference_and_group_together():
    group = long_group(3, filler=5)
    contexts = build_group_contexts("reference_loo_group", group)
    for i, context in enumerate(contexts):
        lines = context.splitlines()
        assert lines[0] == "ref:1234" and len(lines) == 3
        assert group[i].response_text not in context
        assert all(group[j].response_text in context for j in range(3) if j != i)
    with pytest.raises(ValueError, match="at least 2"):
        build_group_contexts("reference_loo_group", group[:1])
    base = {
        "name": "u",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
        "policy": {"tiny": "sudoku-mini"},
    }
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        parse_spec(
            {
                **base,
                "critic": {"context": "reference_loo_group"},
                "rollout": {"group_size": 1},
                "estimator": {"name": "value"},
            }
        )
