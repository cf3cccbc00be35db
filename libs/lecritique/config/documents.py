"""Spec documents before validation: one reader, one merge, one way to say what is wrong.

Every kind of spec a command takes (an experiment, a study and its base, a critic-eval spec, chart
values) is a document, a YAML or JSON file read by :func:`read_document`; documents are combined by
:func:`merge_documents` (a study variant over its base, a values file over the chart's, a sweep's
setting over the critic) and ``--set`` (:mod:`lecritique.config.overrides`); validation errors are
worded by :func:`validation_message`. Why one home: four readers had drifted apart (JSON accepted by
one, the file's name missing from another's message) and three merges disagreed on whether ``null``
deletes a key.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from lecritique.config.errors import describe_errors, model_named


class SpecError(ValueError):
    """An invalid spec; the message names every offending field (or the file that cannot be read)."""


def read_document(path: str | Path, what: str = "spec") -> Any:
    """The data of a YAML file (JSON when its name ends in ``.json``); :class:`SpecError` names the
    file and ``what`` it was read as when it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"cannot read {what} {path}: {error}") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise SpecError(f"{what} {path} is not valid {kind}: {error}") from None


def read_mapping(path: str | Path, what: str = "spec") -> dict[str, Any]:
    """:func:`read_document` for a document that must be a mapping (an empty file is an empty one)."""
    data = read_document(path, what)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"{what} {path} must be a mapping, got {type(data).__name__}")
    return data


def merge_documents(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in, neither changed: mappings merge key by key, any other
    value replaces, and ``None`` (YAML ``null``) deletes the key, as Helm merges values files."""
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_documents(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def validation_message(error: ValidationError, model: type[BaseModel], what: str = "experiment spec") -> str:
    """Every problem on its own line, paths as the YAML spells them; ``model`` is the class that was
    validated (a nested model the error's title names is found under the same base)."""
    lines = [
        f"{path or 'spec'}: {message}"
        for path, message in describe_errors(error, model_named(error.title, model))
    ]
    return f"invalid {what}:\n  " + "\n  ".join(lines)
