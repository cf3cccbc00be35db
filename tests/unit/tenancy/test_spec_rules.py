"""Every spec field that names a path, a module or a URL is under a tenant rule.

The walk starts at :class:`ExperimentSpec` and follows every field's type (unions, optionals,
lists, dicts, discriminated variants) to every pydantic model a spec can hold; no field is listed
by hand. A field *looks like* an address when its name or its docstring says path, folder, file,
URL, endpoint, module, package, Secret or variable; such a field must carry a rule marker
(``json_schema_extra={"x-tenant-rule": ...}``) naming a rule of :mod:`lecritique.tenancy.spec_rules`.
The only exceptions are the few below, each with the reason it names nothing on the platform's side.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from lecritique.config.experiment import ExperimentSpec
from lecritique.envs.sandbox import SandboxConfig
from lecritique.tenancy.spec_rules import CHECKS, RULE_KEY, RULES, model_rule_of, rule_of

ROOT = Path(__file__).resolve().parents[3]
NAME_HINT = re.compile(
    r"(^|_)(path|paths|dir|dirs|directory|folder|file|files|uri|url|urls|endpoint|host|module|modules|"
    r"package|packages|entry|script|command|teacher|secret|env|root|location)($|_)"
)
DOC_HINT = re.compile(
    r"\b(directory|folder|path|file|URL|URI|endpoint|module|importable|Secret|environment variable|package)\b"
)
NOT_ADDRESSES = {
    "OpenAIEndpointConfig.api_key_secret_key": "a key inside the Secret that api_key_secret names (that one is checked)",
}
"""Fields the hints match that name nothing a tenant could point elsewhere, and why."""


def _models_in(annotation: typing.Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


def _names_text(annotation: typing.Any) -> bool:
    """Whether a value of this type can be a string (or hold strings: lists, tuples, dict values)."""
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return False
    return (
        any(_names_text(argument) for argument in typing.get_args(annotation))
        if origin or isinstance(annotation, types.UnionType)
        else False
    )


def spec_fields(root: type[BaseModel]) -> Iterator[tuple[str, str, typing.Any]]:
    """(``Model.field``, field name, FieldInfo) of every field of every model reachable from ``root``."""
    seen: set[type[BaseModel]] = set()
    stack = [root]
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            yield f"{model.__name__}.{name}", name, info
            stack.extend(_models_in(info.annotation))


def looks_like_an_address(name: str, info: typing.Any) -> bool:
    return _names_text(info.annotation) and bool(
        NAME_HINT.search(name) or DOC_HINT.search(info.description or "")
    )


def unruled(root: type[BaseModel]) -> list[str]:
    """Fields that look like a path, module or URL and carry no known rule (the exceptions aside),
    and model classes that carry an unknown rule themselves."""
    found = []
    for qualified, name, info in spec_fields(root):
        rule = rule_of(info)
        for model in _models_in(info.annotation):
            model_rule = model_rule_of(model)
            if model_rule is not None and model_rule not in RULES:
                found.append(f"{model.__name__}: unknown rule {model_rule!r}")
        if rule is not None and rule not in RULES:
            found.append(f"{qualified}: unknown rule {rule!r}")
        elif rule is None and looks_like_an_address(name, info) and qualified not in NOT_ADDRESSES:
            found.append(qualified)
    return found


def test_every_path_module_or_url_field_of_the_spec_is_under_a_rule() -> None:
    assert unruled(ExperimentSpec) == []


def test_the_walk_reaches_the_fields_the_issue_named() -> None:
    rules = {qualified: rule_of(info) for qualified, _, info in spec_fields(ExperimentSpec)}
    assert rules["DatasetConfig.path"] == "dataset_path"
    assert rules["PythonVerifierConfig.entry_point"] == "verifier_entry_point"
    assert rules["TensorBoardTrackerConfig.log_dir"] == rules["TrackioTrackerConfig.dir"] == "tracker_dir"
    assert (
        rules["MlflowTrackerConfig.tracking_uri"] == "tracker_uri"
        and rules["WandbTrackerConfig.mode"] == "wandb_mode"
    )
    assert rules["DistillationConfig.teacher"] == "model_path"  # found by the walk, not named in the issue


def test_every_field_holding_a_sandbox_is_under_the_sandbox_settings_rule() -> None:
    """The rule is the sandbox class's own: CodeIO's ``environment.sandbox`` and any sandbox a spec
    section adds later is checked without a marker of its own (issue 37, item 2)."""
    assert model_rule_of(SandboxConfig) == "sandbox_settings"
    holders = [
        q for q, _, info in spec_fields(ExperimentSpec) if SandboxConfig in list(_models_in(info.annotation))
    ]
    assert "CodeIOConfig.sandbox" in holders


def test_no_exception_is_stale() -> None:
    """Each exception is a field of the spec that the hints match and that carries no rule."""
    matched = {
        q
        for q, name, info in spec_fields(ExperimentSpec)
        if looks_like_an_address(name, info) and rule_of(info) is None
    }
    assert set(NOT_ADDRESSES) <= matched


def test_every_rule_has_a_check_and_is_in_the_threat_model() -> None:
    assert CHECKS.keys() == RULES.keys()
    security = (ROOT / "docs" / "security.md").read_text()
    assert [rule for rule in RULES if f"`{rule}`" not in security] == []


# ---- positive controls: the walk catches what it must ------------------------------------------
class _Inner(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    checkpoint_dir: str | None = None
    """Where to save."""
    callback: str = "x"
    """An importable module:function called at the end."""


class _MarkedModel(BaseModel):
    model_config = ConfigDict(json_schema_extra={RULE_KEY: "no_such_model_rule"})


class _Sneaky(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    name: str = "ok"
    """A plain name."""
    inner: list[_Inner] = Field(default_factory=list)
    """Nested, inside a list."""
    webhook_url: str = "https://example.com"
    """Called on every step."""
    marked: str = Field(default="", json_schema_extra={RULE_KEY: "no_such_rule"})
    """Marked, with a rule that does not exist."""
    settings: _MarkedModel = Field(default_factory=lambda: _MarkedModel())
    """A model whose class carries a rule that does not exist."""
    ruled: str = Field(default="", json_schema_extra={RULE_KEY: "tracker_uri"})
    """Marked with a real rule."""


def test_the_walk_catches_unmarked_path_module_and_url_fields_and_unknown_rules() -> None:
    assert sorted(unruled(_Sneaky)) == sorted(
        [
            "_Inner.checkpoint_dir",
            "_Inner.callback",
            "_Sneaky.webhook_url",
            "_Sneaky.marked: unknown rule 'no_such_rule'",
            "_MarkedModel: unknown rule 'no_such_model_rule'",
        ]
    )


@pytest.mark.parametrize(
    "annotation",
    [str, str | None, tuple[str, ...], list[str], dict[str, str], typing.Optional[str]],  # noqa: UP045
)
def test_string_shapes_are_recognised(annotation: typing.Any) -> None:
    assert _names_text(annotation)


@pytest.mark.parametrize(
    "annotation", [int, float, bool, typing.Literal["a", "b"], typing.Literal["a"] | None]
)
def test_other_shapes_are_not(annotation: typing.Any) -> None:
    assert not _names_text(annotation)
