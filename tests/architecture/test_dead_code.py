"""Code removed as dead (issue #12, item 7) stays out: nothing defines or calls it again."""

from __future__ import annotations

import re

from tests.architecture.conftest import ROOT

REMOVED = ("WaitForUpdates", "compute_with_targets", "state_summary", "policy_template", "evict_stale")
"""Names of removed code: the critic-update wait RPC (end to end: proto, stubs, server, client),
GAE's combined advantages-and-targets call, the state summary and policy template helpers, and the
buffer's test-only eviction."""


def _sources():
    folders = ("libs", "services", "protos", "tests", "bench", "docs")
    return [p for folder in folders for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".pyi", ".proto", ".md")]


def test_removed_code_is_named_nowhere():
    this = ROOT / "tests" / "architecture" / "test_dead_code.py"
    pattern = re.compile(r"\b(" + "|".join(REMOVED) + r")\b")
    found = [f"{p.relative_to(ROOT)}: {m}" for p in _sources() if p != this for m in pattern.findall(p.read_text())]
    assert found == []


def test_the_replay_buffer_has_one_constructor():
    from lecritique.replay import ReplayBuffer

    assert not hasattr(ReplayBuffer, "from_config")
