"""Every dotted code path the docs name (README.md, docs/*.md) names something that exists.

A path is a backticked dotted name that starts with ``lecritique.`` or ``services.``, or with a
package of ``lecritique`` and has at least three parts (``launch.local.processes.verifier_environment``,
written relative to ``lecritique``). Two-part names such as ``orchestrator.steps`` are spec
fields as often as modules, and file names (``state.json``) are not paths. A name resolves as
a module followed by attributes, or, for the few that are not Python, as what the doc says it
is: an entry-point group of ``pyproject.toml`` or a template the Helm chart defines.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from functools import cache

import pytest

from tests.unit.docs.documented import ROOT, doc_files

_SPAN = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_FILE_SUFFIXES = {
    "py",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "md",
    "png",
    "txt",
    "bin",
    "toml",
    "sh",
    "tpl",
    "proto",
}
_PACKAGE = ROOT / "libs" / "lecritique"


def _is_lecritique_package(name: str) -> bool:
    return (_PACKAGE / name / "__init__.py").is_file() or (_PACKAGE / f"{name}.py").is_file()


def code_path(span: str) -> str | None:
    """The absolute dotted path a backticked span names, or None if it names no code path."""
    name = re.sub(r"\(.*\)$", "", span.strip())  # `module.function()` and `f(x)` name the function
    if not _DOTTED.match(name) or name.rpartition(".")[2] in _FILE_SUFFIXES:
        return None
    parts = name.split(".")
    if parts[0] in ("lecritique", "services"):
        return name
    if len(parts) >= 3 and _is_lecritique_package(parts[0]):
        return f"lecritique.{name}"
    return None


def documented_paths() -> dict[str, list[str]]:
    """Absolute path -> where the docs name it (``file:line``)."""
    found: dict[str, list[str]] = {}
    for doc in doc_files():
        for number, line in enumerate(doc.read_text().splitlines(), start=1):
            for span in _SPAN.findall(line):
                path = code_path(span)
                if path is not None:
                    found.setdefault(path, []).append(f"{doc.relative_to(ROOT)}:{number}")
    return found


def resolves_in_python(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name is not None and not ".".join(parts[:cut]).startswith(error.name):
                raise  # the module exists and imports something missing: not this test's question
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


@cache
def _entry_point_groups() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project.get("entry-points", {}))


@cache
def _helm_templates() -> set[str]:
    defined = re.compile(r'\{\{-?\s*define\s+"([^"]+)"')
    return {name for path in (ROOT / "helm").rglob("*.tpl") for name in defined.findall(path.read_text())}


def resolves(path: str) -> bool:
    return path in _entry_point_groups() or path in _helm_templates() or resolves_in_python(path)


PATHS = documented_paths()


def test_the_docs_name_code_paths() -> None:
    assert len(PATHS) > 50, sorted(PATHS)  # the extraction still finds what the docs name


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_documented_path_resolves(path: str) -> None:
    assert resolves(path), (
        f"{path} (named at {', '.join(PATHS[path])}) is no module, attribute, entry-point group or chart template"
    )


@pytest.mark.parametrize(
    ("span", "path"),
    [
        ("launch.processes.verifier_environment", "lecritique.launch.processes.verifier_environment"),
        ("lecritique.critics.kinds.CriticKind", "lecritique.critics.kinds.CriticKind"),
        ("critics.kinds.CRITIC_KINDS()", "lecritique.critics.kinds.CRITIC_KINDS"),
        ("orchestrator.steps", None),
        ("state.json", None),
        ("kinds.py", None),
        ("lecritique run spec.yaml", None),
    ],
)
def test_the_finder_reads_spans_as_the_docs_write_them(span: str, path: str | None) -> None:
    assert code_path(span) == path


def test_a_stale_path_does_not_resolve_and_a_current_one_does() -> None:
    """The line docs/ARCHITECTURE.md had: the module moved to ``launch.local.processes``."""
    assert not resolves("lecritique.launch.processes.verifier_environment")
    assert resolves("lecritique.launch.local.processes.verifier_environment")
    assert not resolves("lecritique.critics.kinds.CriticKind.admitted_estimators")
    assert resolves("lecritique.services") and resolves("lecritique.checkTokens")
