"""Command-line overrides of a spec: ``--set critic.optimizer.lr=3e-4 --set rollout.group_size=8``.

An override is a dotted path and a value, applied to the spec's document (the YAML as loaded)
before validation, so an overridden spec is checked exactly like one written out in full. The
value is read as YAML (``8`` is an int, ``true`` a bool, ``[a, b]`` a list, ``{k: v}`` a
mapping); a number in exponent form without a dot (``3e-4``, which YAML 1.1 reads as a string)
is read as a float. The path is checked against the spec's models before anything is applied: an
unknown field is refused with the nearest known name, as in a YAML file. Inside a discriminated
union (``critic``, ``estimator``, ``environment``) the fields of every alternative are known; the
validation that follows says whether the alternative the document selects has it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_origin

import yaml
from pydantic import BaseModel

from lecritique.config.errors import _flatten, _models, _step, unknown_field_message

_EXPONENT_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)[eE][+-]?\d+")


class OverrideError(ValueError):
    """An override that cannot be applied; the message names it."""


@dataclass(frozen=True)
class Override:
    path: tuple[str, ...]
    """The dotted path, split (``("critic", "optimizer", "lr")``)."""
    value: Any
    """The value, read as YAML."""
    text: str
    """The override as given (``critic.optimizer.lr=3e-4``), for messages."""


def parse_override(text: str) -> Override:
    """``a.b.c=value`` -> :class:`Override`; refuses a missing ``=``, an empty path or an empty part."""
    path_text, equals, value_text = text.partition("=")
    if not equals:
        raise OverrideError(f"--set {text!r}: expected PATH=VALUE, e.g. critic.optimizer.lr=3e-4")
    parts = tuple(part.strip() for part in path_text.strip().split("."))
    if not path_text.strip() or any(not part for part in parts):
        raise OverrideError(f"--set {text!r}: the path must be dotted field names, e.g. rollout.group_size")
    return Override(parts, _value(value_text.strip(), text), text)


def _value(text: str, whole: str) -> Any:
    if _EXPONENT_NUMBER.fullmatch(text):
        return float(text)
    try:
        return yaml.safe_load(text) if text else ""
    except yaml.YAMLError as error:
        raise OverrideError(f"--set {whole!r}: the value is not valid YAML: {error}") from None


def check_path(model: type[BaseModel], override: Override) -> None:
    """Refuse a path that names no field of ``model`` (did-you-mean with the nearest known name)."""
    alternatives: list[Any] = _flatten(model)
    for depth, part in enumerate(override.path):
        models = _models(alternatives)
        if not any(_is_open(item) for item in alternatives):
            if not models:
                leaf = ".".join(override.path[:depth])
                raise OverrideError(f"--set {override.text!r}: {leaf} is a value, it has no field {part!r}")
            names = {field.alias or name for m in models for name, field in m.model_fields.items()}
            if part not in names:
                where = ".".join(override.path[:depth]) or "the spec"
                raise OverrideError(
                    f"--set {override.text!r}: {where}: {unknown_field_message(part, models)}"
                )
        alternatives, _ = _step(alternatives, part)


def _is_open(annotation: Any) -> bool:
    """A type whose keys or indices the models do not name: a mapping, a sequence, or Any."""
    if annotation is Any:
        return True
    origin = get_origin(annotation)
    return isinstance(origin, type) and issubclass(origin, Mapping | Sequence) and origin is not str


def apply_overrides(
    document: Mapping[str, Any], overrides: Iterable[str], model: type[BaseModel]
) -> dict[str, Any]:
    """A copy of ``document`` with every override applied in order (later ones win)."""
    result: dict[str, Any] = copy.deepcopy(dict(document))
    for text in overrides:
        override = parse_override(text)
        check_path(model, override)
        _assign(result, override)
    return result


def _assign(document: dict[str, Any], override: Override) -> None:
    node: Any = document
    for depth, part in enumerate(override.path[:-1]):
        if isinstance(node, list):
            node = node[_index(node, part, override, depth)]
            continue
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict | list):
            where = ".".join(override.path[: depth + 1])
            raise OverrideError(f"--set {override.text!r}: {where} is {child!r}, not a section")
        node = child
    last = override.path[-1]
    if isinstance(node, list):
        node[_index(node, last, override, len(override.path) - 1)] = override.value
    else:
        node[last] = override.value


def _index(items: list[Any], part: str, override: Override, depth: int) -> int:
    where = ".".join(override.path[:depth]) or "the spec"
    if not part.isdigit() or int(part) >= len(items):
        raise OverrideError(
            f"--set {override.text!r}: {where} is a list of {len(items)}; {part!r} is not an index of it"
        )
    return int(part)
