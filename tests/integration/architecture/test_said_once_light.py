"""The ceiling arithmetic stays light: a fresh interpreter imports it without torch (a process;
the rest of "said once" is tests/unit/architecture/test_said_once.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.unit.architecture.test_said_once import LIBS, _python_files


def test_the_ceiling_arithmetic_has_one_home_and_it_stays_light():
    """``critic_eval/ceiling.py`` defines it and every user imports it from there; the orchestrator
    imports it, so it must not pull in torch (critic_eval's package imports its heavy names lazily)."""
    assert not (LIBS / "advantages" / "ceiling.py").exists()
    definitions = sorted(
        f"{path.relative_to(LIBS)}:{node.name}"
        for path in _python_files()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        and node.name in {"variance_terms", "ceiling_of", "critic_ev", "probe_summary"}
    )
    assert definitions == [
        f"critic_eval/ceiling.py:{name}"
        for name in ("ceiling_of", "critic_ev", "probe_summary", "variance_terms")
    ]
    roots = [LIBS.parents[1] / folder for folder in ("libs", "services", "tests", "bench")]
    stale = [
        str(path)
        for root in roots
        for path in root.rglob("*.py")
        if "advantages.ceiling" in path.read_text() and path.resolve() != Path(__file__).resolve()
    ]
    assert stale == []
    light = subprocess.run(
        [sys.executable, "-c", "import sys, lecritique.critic_eval.ceiling; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(LIBS.parent)},
    )
    assert light.stdout.strip() == "False"
