"""Whether two model folders are the same tiny build, whatever their paths say.

A run folder's ``spec.json`` records the policy's resolved path. For a spec that names a tiny build
(``policy: {tiny: sudoku-mini}``) that path is the cache's folder of the build, and a rerun of the
same spec must be recognised as the same run even where the path moved: an earlier version handed
out builds cut by a time guard from ``.uncached-<key>-...`` folders (issue 48), and a cache root may
move between machines. Two folders are the same build when their recorded build settings
(``build_config.json``: task, seed, architecture, schedule; not the wall-clock limit) are equal, or,
where a folder is gone, when the build keys in their names are.

Not part of the build's code hash: it decides nothing about the model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_KEY = re.compile(r"^(?:\.uncached-)?([0-9a-f]{20})(?:-.*)?$")
"""A cache folder's name: the build key, or an old cut build's ``.uncached-<key>-<pid>-<ns>``."""


def build_key(path: str | Path) -> str | None:
    """The build key a tiny-build folder's name carries (None: not a tiny build's folder)."""
    match = _KEY.match(Path(path).name)
    return match.group(1) if match else None


def _settings(path: Path) -> dict[str, Any] | None:
    try:
        settings = json.loads((path / "build_config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(settings, dict):
        return None
    settings.pop("max_minutes", None)
    return settings


def same_build(first: str | Path, second: str | Path) -> bool:
    """Whether two policy folders hold the same tiny build (equal build settings; or equal keys
    where one folder is gone). Folders that are not tiny builds are the same only if equal."""
    if Path(first) == Path(second):
        return True
    keys = build_key(first), build_key(second)
    if None in keys:
        return False
    settings = _settings(Path(first)), _settings(Path(second))
    if None not in settings:
        return settings[0] == settings[1]
    return keys[0] == keys[1]
