"""``--set PATH=VALUE`` overrides (issue 40) and the field-by-field spec comparison behind the
refusal of a rerun with another spec (issue 41)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lecritique.config import ExperimentSpec, SpecError, load_spec, parse_spec
from lecritique.config.changes import ABSENT, spec_changes
from lecritique.config.overrides import OverrideError, apply_overrides, parse_override

BASE = {
    "name": "base",
    "environment": {"kind": "sudoku"},
    "policy": {"path": "/models/tiny"},
    "estimator": {"name": "tether"},
    "critic": {"context": "reference", "optimizer": {"lr": 1e-4}},
    "orchestrator": {"steps": 10},
}


def test_values_are_read_as_yaml_and_exponent_numbers_as_floats() -> None:
    assert parse_override("critic.optimizer.lr=3e-4").value == 3e-4
    assert parse_override("rollout.group_size=8").value == 8
    assert parse_override("critic.checkpoint_every=null").value is None
    assert parse_override("x=true").value is True
    assert parse_override("name=a=b").value == "a=b"  # only the first '=' splits
    assert parse_override("tracking=[{kind: tensorboard}]").value == [{"kind": "tensorboard"}]


@pytest.mark.parametrize("text", ["critic.optimizer.lr", "=3", "critic..lr=1", ".lr=1"])
def test_a_malformed_override_is_refused(text: str) -> None:
    with pytest.raises(OverrideError, match="--set"):
        parse_override(text)


def test_overrides_apply_in_order_and_leave_the_document_alone() -> None:
    document = yaml.safe_load(yaml.safe_dump(BASE))
    applied = apply_overrides(
        document,
        ["critic.optimizer.lr=3e-4", "rollout.group_size=8", "rollout.group_size=6"],
        ExperimentSpec,
    )
    spec = parse_spec(applied)
    assert spec.critic is not None and spec.critic.optimizer.lr == 3e-4  # type: ignore[union-attr]
    assert spec.rollout.group_size == 6
    assert document == BASE  # a copy was changed, not the caller's document


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("critic.optimizer.lrr=1", "critic.optimizer: unknown field 'lrr'; did you mean 'lr'?"),
        ("rollut.group_size=8", "the spec: unknown field 'rollut'; did you mean 'rollout'?"),
        ("rollout.group_size.x=1", "rollout.group_size is a value, it has no field 'x'"),
        ("name.first=1", "name is a value, it has no field 'first'"),
    ],
)
def test_an_unknown_path_is_named_with_the_nearest_field(override: str, message: str) -> None:
    with pytest.raises(OverrideError) as raised:
        apply_overrides(BASE, [override], ExperimentSpec)
    assert message in str(raised.value)


def test_a_field_of_another_union_alternative_is_left_to_validation() -> None:
    """``critic.llm`` exists for the frozen LLM critic only: the path is known, the validation of
    the discriminative critic the document selects refuses it, naming the field."""
    applied = apply_overrides(BASE, ["critic.llm.model=m"], ExperimentSpec)
    with pytest.raises(SpecError, match="critic.llm"):
        parse_spec(applied)


def test_load_spec_applies_overrides_and_names_them_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert load_spec(path, overrides=["orchestrator.steps=3"]).orchestrator.steps == 3
    with pytest.raises(SpecError, match="orchestrator.steps"):
        load_spec(path, overrides=["orchestrator.steps=0"])
    with pytest.raises(SpecError, match=r"--set 'orchestrator\.stepz=3'"):
        load_spec(path, overrides=["orchestrator.stepz=3"])


def test_spec_changes_name_every_changed_leaf() -> None:
    before = parse_spec(BASE)
    after = parse_spec(
        {**BASE, "critic": {"context": "reference", "optimizer": {"lr": 3e-3}}, "orchestrator": {"steps": 12}}
    )
    assert [(change.field, change.before, change.after) for change in spec_changes(before, after)] == [
        ("critic.optimizer.lr", 1e-4, 3e-3),
        ("orchestrator.steps", 10, 12),
    ]
    assert spec_changes(before, parse_spec(BASE)) == []


def test_spec_changes_across_a_union_say_which_fields_came_and_went() -> None:
    before = parse_spec(BASE)
    after = parse_spec({**BASE, "estimator": {"name": "mean"}, "critic": None})
    changes = {change.field: change for change in spec_changes(before, after)}
    assert changes["estimator.name"].after == "mean"
    assert changes["critic"].after is None and isinstance(changes["critic"].before, dict)
    removed = [change for change in spec_changes(before, after) if change.after is ABSENT]
    assert all("(absent)" in str(change) for change in removed)
