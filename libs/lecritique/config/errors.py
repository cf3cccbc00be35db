"""Validation errors as a person reads them: the path as the YAML spells it, and for an unknown
field the nearest known name and every known one.

pydantic's own locations put a discriminated union's tag into the path
(``environment.dataset.verifier`` for ``environment: {kind: dataset, verifier: ...}``); here the
path is walked through the model's types, so each tag is recognised as one and left out.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

_CONTAINERS = (list, tuple, set, frozenset, Sequence)


def _flatten(annotation: Any) -> list[Any]:
    """The alternatives an annotation allows (Annotated and unions unwrapped)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _flatten(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [item for argument in get_args(annotation) for item in _flatten(argument)]
    return [annotation]


def _literals(annotation: Any) -> set[Any]:
    return {value for item in _flatten(annotation) if get_origin(item) is Literal for value in get_args(item)}


def _models(alternatives: list[Any]) -> list[type[BaseModel]]:
    return [item for item in alternatives if isinstance(item, type) and issubclass(item, BaseModel)]


def _step(alternatives: list[Any], part: Any) -> tuple[list[Any], bool]:
    """The alternatives one location part leads to, and whether that part was a union's tag."""
    models = _models(alternatives)
    for model in models:
        for name, field in model.model_fields.items():
            if part in (name, field.alias):
                return _flatten(field.annotation), False
    if isinstance(part, str):
        tagged = [
            model
            for model in models
            if any(part in _literals(field.annotation) for field in model.model_fields.values())
        ]
        if tagged:
            return list(tagged), True
    for item in alternatives:
        origin = get_origin(item)
        arguments = get_args(item)
        if (
            origin is not None
            and isinstance(origin, type)
            and issubclass(origin, Mapping)
            and len(arguments) == 2
        ):
            return _flatten(arguments[1]), False
        if origin is not None and isinstance(origin, type) and issubclass(origin, _CONTAINERS) and arguments:
            return _flatten(arguments[0]), False
    return [], False


def yaml_path(model: type[BaseModel], location: Sequence[Any]) -> str:
    """The dotted path of a pydantic error location as the document spells it (no union tags)."""
    alternatives: list[Any] = [model]
    parts: list[str] = []
    for part in location:
        alternatives, is_tag = _step(alternatives, part)
        if not is_tag:  # a tag names the alternative; the parts after it are that model's fields
            parts.append(str(part))
    return ".".join(parts)


def unknown_field_message(name: str, parents: list[type[BaseModel]]) -> str:
    """``unknown field 'x'; did you mean 'y'? (known: ...)`` with the fields of the parent model."""
    known = sorted({field.alias or key for parent in parents for key, field in parent.model_fields.items()})
    if not known:
        return f"unknown field {name!r}"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown field {name!r}{hint} (known: {', '.join(known)})"


def describe_errors(error: ValidationError, model: type[BaseModel]) -> list[tuple[str, str]]:
    """(path, message) per problem, paths as the document spells them."""
    problems = []
    for item in error.errors():
        location = item["loc"]
        if item["type"] == "extra_forbidden":
            path, name = yaml_path(model, location[:-1]), str(location[-1])
            problems.append(
                (
                    f"{path}.{name}" if path else name,
                    unknown_field_message(name, _parents_of(model, location)),
                )
            )
        else:
            problems.append((yaml_path(model, location), str(item["msg"])))
    return problems


def _parents_of(model: type[BaseModel], location: Sequence[Any]) -> list[type[BaseModel]]:
    """The models that may hold the location's last part (after a union's tag: just that alternative)."""
    alternatives: list[Any] = [model]
    for part in location[:-1]:
        alternatives, _ = _step(alternatives, part)
    return _models(alternatives)


def model_named(title: str, default: type[BaseModel]) -> type[BaseModel]:
    """The model class a ValidationError's title names (the spec models are subclasses of
    ``default``'s base); ``default`` when none or several have that name."""
    found: list[type[BaseModel]] = []
    stack: list[type[BaseModel]] = [
        default.__mro__[1] if issubclass(default.__mro__[1], BaseModel) else default
    ]
    seen: set[type[BaseModel]] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.__name__ == title:
            found.append(current)
        stack.extend(current.__subclasses__())
    return found[0] if len(found) == 1 else default
