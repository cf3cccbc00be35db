"""Critic kinds are one table: its rows match the spec union, and no other module compares kind names."""

import ast
import typing

from lecritique.config import parse_spec
from lecritique.critics.kinds import KINDS, PodNeeds, SecretEnv, critic_kind
from lecritique.critics.specs import CriticSpec


def test_every_spec_class_of_the_union_is_one_row_of_the_table():
    union_members = typing.get_args(typing.get_args(CriticSpec)[0])
    assert {member.model_fields["kind"].default for member in union_members} == set(KINDS)
    for member in union_members:
        kind = KINDS[member.model_fields["kind"].default]
        assert kind.spec is member
        assert critic_kind(member.model_construct()) is kind


def test_trained_kinds_have_a_trainer_and_the_frozen_llm_has_none():
    assert {name for name, kind in KINDS.items() if kind.trained} == {"discriminative", "generative"}
    assert all((kind.trainer is not None) == kind.trained for kind in KINDS.values())


def _spec(critic):
    return parse_spec(
        {
            "name": "kinds",
            "environment": {"kind": "arithmetic"},
            "policy": {"path": "/m"},
            "estimator": {"name": "lvrl"},
            "critic": critic,
        }
    )


def _pod_needs(critic):
    spec = _spec(critic)
    return critic_kind(spec.critic).pod_needs(spec.critic)


def test_only_a_frozen_llm_behind_an_endpoint_with_a_secret_needs_one():
    llm = {"kind": "openai", "base_url": "http://llm/v1", "model": "m", "api_key_secret": "keys"}
    assert _pod_needs({"kind": "frozen_llm", "llm": llm}) == PodNeeds(
        (SecretEnv("OPENAI_API_KEY", "keys", "api-key"),)
    )
    assert _pod_needs({"kind": "frozen_llm"}) == PodNeeds()
    assert _pod_needs({}) == PodNeeds()


def _kind_comparisons(module):
    """Lines where a critic kind's name is compared (==, !=, in, match) or looked up in this module."""
    names = set(KINDS)

    def names_a_kind(node):
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(names_a_kind(element) for element in node.elts)
        return False

    lines = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Compare) and any(
            names_a_kind(side) for side in [node.left, *node.comparators]
        ):
            lines.append(node.lineno)
        if isinstance(node, ast.MatchValue) and names_a_kind(node.value):
            lines.append(node.lineno)
        # A lookup by name (``table["generative"]``, ``table.get("frozen_llm")``) decides on a kind too.
        declares = (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Literal"
        )
        if isinstance(node, ast.Subscript) and not declares and names_a_kind(node.slice):
            lines.append(node.lineno)
        is_get = (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        )
        if is_get and node.args and names_a_kind(node.args[0]):
            lines.append(node.lineno)
    return lines


def test_the_name_of_a_critic_kind_is_compared_in_the_table_module_at_most(modules):
    comparing = {
        module.relative: lines for module in modules.values() if (lines := _kind_comparisons(module))
    }
    assert set(comparing) <= {"libs/lecritique/critics/kinds.py"}, comparing


def test_the_finder_catches_comparisons_and_lookups():
    source = 'a = kind == "generative"\nb = table["frozen_llm"]\nc = table.get("discriminative")\nd = x in ("generative",)\ne: Literal["generative"] = "generative"\n'

    class Parsed:
        tree = ast.parse(source)

    assert _kind_comparisons(Parsed) == [1, 2, 3, 4]


def test_a_spec_finds_its_kind_by_its_class_in_the_table_module():
    """The one decision ``which kind is this critic`` is ``critics.kinds.critic_kind``."""
    assert critic_kind.__module__ == "lecritique.critics.kinds"
    for name, kind in KINDS.items():
        assert kind.name == name
