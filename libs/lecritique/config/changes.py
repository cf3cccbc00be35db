"""What differs between two experiment specs, field by field.

A run folder's ``spec.json`` must describe what was trained. A rerun into the same folder with an
edited spec would otherwise continue under the old settings (the trainers restore their optimizer
state, learning rate included, from their checkpoints) while ``spec.json`` said the new ones, so
the launcher compares the two first and names every changed field (:func:`spec_changes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

ABSENT = object()
"""The value of a field one of the two specs does not have."""


@dataclass(frozen=True)
class SpecChange:
    field: str
    """Dotted path of the field (``policy_trainer.optimizer.lr``; list items by index)."""
    before: Any
    """The recorded value (:data:`ABSENT` when the recorded spec has no such field)."""
    after: Any
    """The new value (:data:`ABSENT` when the new spec has no such field)."""

    def __str__(self) -> str:
        return f"{self.field}: {_short(self.before)} -> {_short(self.after)}"


def _short(value: Any) -> str:
    text = "(absent)" if value is ABSENT else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def spec_changes(before: BaseModel, after: BaseModel) -> list[SpecChange]:
    """Every leaf that differs between the two specs' JSON forms, in document order."""
    changes: list[SpecChange] = []
    _compare(before.model_dump(mode="json"), after.model_dump(mode="json"), "", changes)
    return changes


def _compare(before: Any, after: Any, here: str, changes: list[SpecChange]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(key for key in after if key not in before)]:
            _compare(
                before.get(key, ABSENT), after.get(key, ABSENT), f"{here}.{key}" if here else key, changes
            )
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            _compare(old, new, f"{here}.{index}", changes)
    elif before != after:
        changes.append(SpecChange(here, before, after))
