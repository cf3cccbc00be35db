"""The repository is self-contained: no file points outside it for the design or the papers.

Papers are cited by title and arXiv id (docs/ARCHITECTURE.md, "What it is"); the design lives in
docs/ARCHITECTURE.md. A path such as ``../shared/DESIGN.md`` or ``papers/le-critique-....txt``
names files a reader of this repository does not have.
"""

from __future__ import annotations

import re
import subprocess

from tests.unit.architecture.conftest import ROOT

OUTSIDE = re.compile(
    r"\.\./shared|\bshared/(?:DESIGN|NOTES|papers)|\bpapers/[\w.-]+|\bDESIGN\.md\b|/work/(?:shared|main|wt)\b"
)
"""A reference to a file outside the repository (the shared design notes, the papers folder)."""
THIS_FILE = "tests/integration/architecture/test_self_contained.py"


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name and name != THIS_FILE]


def test_no_file_cites_a_path_outside_the_repository():
    found = []
    for name in _tracked_text_files():
        try:
            text = (ROOT / name).read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [
            f"{name}:{n}: {line.strip()}"
            for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)
        ]
    assert found == []


def test_the_pattern_finds_the_references_it_is_for():
    for line in (
        "see ../shared/DESIGN.md",
        "papers/le-critique-privileged-value-functions.txt",
        "/work/shared/NOTES.md",
    ):
        assert OUTSIDE.search(line), line
    assert not OUTSIDE.search(
        "Le Critique: Privileged Value Functions for LLM Reinforcement Learning (arXiv:2608.16739)"
    )
