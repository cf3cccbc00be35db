"""Host folders out of what a tenant reads over the API.

Error bodies, failed records and logs are written by code that knows absolute paths: the API's
runs folder, the run's own folder, the checkout and the Python installation in a traceback, a
cache or temporary folder. A tenant needs none of them. :meth:`HostPaths.hide` rewrites every
absolute path of a message: one under a named folder becomes that name and the rest of the path
(``<run>/run/logs/rollout-0.log``, ``<lecritique>/libs/...``), one the tenant writes itself stays
as written (its model and dataset roots, which it must name in every spec, and the paths of its
own spec), and any other keeps its last component only (``.../passwd``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[3]
"""The source checkout when lecritique runs from one (``libs/lecritique`` inside it)."""
_ABSOLUTE = re.compile(r"(?<![\w.~:/\\-])/[^\s'\"`,;()\[\]{}<>|=]+")
"""An absolute path in running text: not the tail of a URL, a relative path or a word."""
Anchors = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class HostPaths:
    """The named and the kept folders of one API process (see the module docstring)."""

    anchors: Anchors = ()
    """(folder, name) pairs, longest folder first; name None: paths under it stay as written."""

    @classmethod
    def of(cls, named: Mapping[str, str | os.PathLike[str]], kept: Iterable[str] = ()) -> HostPaths:
        """``named``: name -> folder (``{"<runs>": settings.runs_dir}``), with the checkout and the
        interpreter's installation added, each folder as given, absolute and with links resolved;
        ``kept``: folders whose paths a tenant writes itself (its model and dataset roots)."""
        pairs = [(str(folder), name) for name, folder in named.items()]
        pairs += [(sys.prefix, "<python>"), (sys.base_prefix, "<python>")]
        if (CHECKOUT / "libs" / "lecritique").is_dir():
            pairs.append((str(CHECKOUT), "<lecritique>"))
        return cls(_anchors(pairs, kept))

    def hide(
        self, text: str, run_dir: str | os.PathLike[str] | None = None, written: Iterable[str] = ()
    ) -> str:
        """``text`` with its absolute paths rewritten; ``run_dir``: the experiment's run folder
        (``<run>``); ``written``: paths the tenant's spec names (kept as written)."""
        anchors = _merged(self.anchors, _anchors([(str(run_dir), "<run>")] if run_dir else [], written))

        def rename(match: re.Match[str]) -> str:
            path = match.group(0)
            stripped = path.rstrip(".:")  # the end of a sentence or a "path:" label
            trail = path[len(stripped) :]
            for folder, name in anchors:
                if stripped == folder or stripped.startswith(folder + "/"):
                    return path if name is None else name + stripped[len(folder) :] + trail
            last = stripped.rstrip("/").rsplit("/", 1)[-1]
            return (f".../{last}" if last else "/") + trail

        return _ABSOLUTE.sub(rename, text)


def spec_paths(data: Any) -> list[str]:
    """Every absolute path a spec (JSON data) names: its model, dataset and other path fields."""
    if isinstance(data, dict):
        return [path for value in data.values() for path in spec_paths(value)]
    if isinstance(data, list):
        return [path for value in data for path in spec_paths(value)]
    return [data] if isinstance(data, str) and data.startswith("/") and data.strip("/") else []


def _anchors(named: Iterable[tuple[str, str | None]], kept: Iterable[str] = ()) -> Anchors:
    """Named folders as given, absolute and resolved, and the kept ones as written; longest first."""
    pairs: list[tuple[str, str | None]] = []
    for folder, name in named:
        pairs += [
            (spelling, name)
            for spelling in {os.path.normpath(folder), os.path.abspath(folder), os.path.realpath(folder)}
        ]
    pairs += [(os.path.normpath(folder), None) for folder in kept]
    return _merged(tuple(pairs))


def _merged(*groups: Anchors) -> Anchors:
    """One list, longest folder first; a folder both named and kept is named; the root is dropped."""
    spelled: dict[str, str | None] = {}
    for folder, name in (pair for group in groups for pair in group):
        if folder.startswith("/") and folder != "/" and spelled.get(folder) is None:
            spelled[folder] = name
    return tuple(sorted(spelled.items(), key=lambda item: len(item[0]), reverse=True))
