"""Bounds of a reasoning-gym dataset's ``config``, a mapping the spec passes to the dataset's generator.

The spec cannot type it (every dataset has its own settings), so the server bounds it here: only
settings the dataset's config class has (``seed`` and ``size`` are the environment's), nested at
most :data:`MAX_DEPTH` deep, at most :data:`MAX_VALUES` values and :data:`MAX_STRING_CHARS`
characters per string; every number at most ``max_generator_scale`` times the largest number of
that setting's default (times 1 where the default holds none), so ``max_terms: 100000000`` is
refused where the default is 6. A setting naming a file (``*_file``, e.g. spell_backward's
``data_file``) must name one of reasoning-gym's own data files: its generator joins the name to the
package's data folder, so an absolute path or ``..`` would read any file of the verifier's host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cache
from typing import Any

from lecritique.tenancy.policy import TenantPolicy, Violation, raised_with

MAX_DEPTH = 3
"""Nesting of one setting's value (a list of lists is 2; reasoning-gym's deepest default is 2)."""
MAX_VALUES = 256
"""Numbers, strings and booleans in one dataset's config (its longest default list has 43 names)."""
MAX_STRING_CHARS = 1_000
"""Characters of one string."""
_ENVIRONMENT_SETTINGS = frozenset({"seed", "size"})


@cache
def dataset_defaults(name: str) -> dict[str, Any]:
    """The default settings of a registered reasoning-gym dataset (its config dataclass's fields)."""
    from reasoning_gym.factory import DATASETS  # imported lazily: importing reasoning-gym takes ~1.5 s

    config = DATASETS[name][1]()
    return {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}


@cache
def data_files() -> frozenset[str]:
    """The names of the files in reasoning-gym's data folder."""
    from importlib import resources

    return frozenset(
        entry.name for entry in resources.files("reasoning_gym.data").iterdir() if entry.is_file()
    )


def _leaves(value: Any) -> Iterator[tuple[int, Any]]:
    """(depth, scalar) of every scalar of a value, iteratively (a hostile value may nest deeply)."""
    stack = [(0, value)]
    while stack:
        depth, current = stack.pop()
        if isinstance(current, dict):
            stack.extend((depth + 1, item) for item in current.values())
        elif isinstance(current, list | tuple):
            stack.extend((depth + 1, item) for item in current)
        else:
            yield depth, current


def _numbers(value: Any) -> list[float]:
    return [
        abs(leaf)
        for _, leaf in _leaves(value)
        if isinstance(leaf, int | float) and not isinstance(leaf, bool)
    ]


def _setting_violations(
    field: str, key: str, value: Any, default: Any, policy: TenantPolicy
) -> list[Violation]:
    leaves = list(_leaves(value))
    depth = max(depth for depth, _ in leaves) if leaves else 1
    if depth > MAX_DEPTH:
        return [Violation(field, f"nested {depth} deep; a setting nests at most {MAX_DEPTH} deep", "limit")]
    if any(isinstance(leaf, str) and len(leaf) > MAX_STRING_CHARS for _, leaf in leaves):
        return [Violation(field, f"strings of a setting hold at most {MAX_STRING_CHARS} characters", "limit")]
    if key.endswith("_file") and (not isinstance(value, str) or value not in data_files()):
        return [
            Violation(
                field, f"must name one of reasoning-gym's data files: {sorted(data_files())}", "forbidden"
            )
        ]
    largest, bound = (
        max(_numbers(value), default=0.0),
        policy.max_generator_scale * max([1.0, *_numbers(default)]),
    )
    if largest <= bound:
        return []
    return [
        Violation(
            field,
            f"{largest:g} exceeds {policy.max_generator_scale:g} x the dataset's default ({default!r}) = "
            f"{bound:g}; {raised_with('maxGeneratorScale')}",
            "limit",
        )
    ]


def generator_violations(spec_data: dict[str, Any], policy: TenantPolicy) -> list[Violation]:
    """Every reasoning-gym ``config`` of a dumped spec within the bounds above."""
    environment = spec_data.get("environment") or {}
    if environment.get("kind") != "reasoning_gym":
        return []
    found: list[Violation] = []
    for name, entry in (environment.get("datasets") or {}).items():
        config = entry.get("config") if isinstance(entry, dict) else None
        if not config:
            continue
        field = f"environment.datasets.{name}.config"
        if sum(1 for _ in _leaves(config)) > MAX_VALUES:
            found.append(Violation(field, f"holds more than {MAX_VALUES} values", "limit"))
            continue
        defaults = dataset_defaults(name)
        settings = sorted(set(defaults) - _ENVIRONMENT_SETTINGS)
        for key, value in config.items():
            if key not in settings:
                found.append(
                    Violation(f"{field}.{key}", f"not a setting of {name}; its settings: {settings}", "limit")
                )
            else:
                found.extend(_setting_violations(f"{field}.{key}", key, value, defaults[key], policy))
    return found
