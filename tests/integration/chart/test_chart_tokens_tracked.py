"""No file git tracks carries the hash of a published token (``git ls-files``: a process; the chart's
refusals are tested in tests/unit/chart/test_chart_tokens.py)."""

from __future__ import annotations

import subprocess

from lecritique.tenancy.tokens import PUBLISHED_HASHES
from tests.helm_support import ROOT


def test_no_shipped_file_carries_a_published_hash() -> None:
    """Values files, kustomize trees and docs: the hashes live only where they are refused."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    allowed = {"libs/lecritique/tenancy/tokens.py", "helm/lecritique/templates/_helpers.tpl"}
    carrying = [
        path
        for path in tracked
        if path not in allowed
        and (ROOT / path).is_file()
        and any(
            digest.removeprefix("sha256:") in (ROOT / path).read_text(errors="ignore")
            for digest in PUBLISHED_HASHES
        )
    ]
    assert carrying == []
