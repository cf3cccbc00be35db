"""Code removed as dead (issue #12, item 7) stays out: nothing defines or calls it again."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from tests.unit.architecture.conftest import ROOT

REMOVED = (
    "WaitForUpdates",
    "compute_with_targets",
    "state_summary",
    "policy_template",
    "evict_stale",
    "action_texts",
    "collective_save",
    "is_sharded",
)
"""Names of removed code: the critic-update wait RPC (end to end: proto, stubs, server, client),
GAE's combined advantages-and-targets call, the state summary and policy template helpers, the
buffer's test-only eviction (issue #12), and (issue #27) the episode batch's decoded actions, the
trainer's collective-save flag and FSDP's sharded-model check."""

CALLED_BY_FRAMEWORKS = frozenset({"intercept_service"})
"""Methods that a library calls by name (gRPC's server interceptor hook)."""


def _sources():
    folders = ("libs", "services", "protos", "tests", "bench", "docs")
    return [
        p
        for folder in folders
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".py", ".pyi", ".proto", ".md")
    ]


def test_removed_code_is_named_nowhere():
    this = Path(__file__).resolve()
    pattern = re.compile(r"\b(" + "|".join(REMOVED) + r")\b")
    found = [
        f"{p.relative_to(ROOT)}: {m}" for p in _sources() if p != this for m in pattern.findall(p.read_text())
    ]
    assert found == []


def test_the_replay_buffer_has_one_constructor():
    from lecritique.replay import ReplayBuffer

    assert not hasattr(ReplayBuffer, "from_config")


def _defined_functions() -> list[tuple[str, str]]:
    """(file, name) of every plain function and method of libs/ and services/ (decorated ones, which
    validators, CLI commands and registries call, and dunders aside)."""
    plain = ("property", "staticmethod", "classmethod")
    found = []
    for path in [*(ROOT / "libs" / "lecritique").rglob("*.py"), *(ROOT / "services").rglob("*.py")]:
        if "/v1/" in str(path):
            continue
        for node in ast.parse(path.read_text()).body:
            members = node.body if isinstance(node, ast.ClassDef) else [node]
            for member in members:
                if not isinstance(member, ast.FunctionDef) or member.name.startswith("__"):
                    continue
                if all(isinstance(d, ast.Name) and d.id in plain for d in member.decorator_list):
                    found.append((str(path.relative_to(ROOT)), member.name))
    return found


def test_no_function_is_used_only_by_tests_or_by_nothing():
    """A function or method named nowhere in libs/, services/, bench/ or helm/ (the chart's generator
    scripts) but its own definition is dead, or a helper only tests call (it belongs in tests/).
    Same-named definitions count as uses of each other, so this finds a lower bound: no false
    alarms, not every dead helper."""
    folders = [ROOT / "libs" / "lecritique", ROOT / "services", ROOT / "bench", ROOT / "helm"]
    words = Counter(
        word
        for folder in folders
        for p in folder.rglob("*.py")
        if "/v1/" not in str(p)
        for word in re.findall(r"\w+", p.read_text())
    )
    dead = [
        f"{path}: {name}"
        for path, name in _defined_functions()
        if name not in CALLED_BY_FRAMEWORKS and words[name] <= 1
    ]
    assert dead == []


def test_no_test_skips_on_a_missing_dependency():
    """Every dependency the tests use is pinned (pyproject, `make test` installs it): a missing one
    must fail the run, not skip its tests silently (`pytest.importorskip`)."""
    this = Path(__file__).resolve()
    found = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("*.py")
        if p != this and "importorskip(" in p.read_text()
    ]
    assert found == []
