"""Loading a spec needs no torch: the REST API and the launchers read specs without ML libraries."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_PROBE = """
import json, sys
from pathlib import Path
from lecritique.config import load_spec
for path in sorted(p for p in Path(sys.argv[1]).glob("**/*.yaml") if "studies" not in p.parts):
    load_spec(path)
print(json.dumps(sorted(m for m in ("torch", "transformers", "vllm") if m in sys.modules)))
"""


def heavy_modules_imported(probe: str, *args: str) -> list[str]:
    """What ``probe`` (run in a fresh interpreter) printed: the heavy libraries it imported."""
    environment = {"PYTHONPATH": f"{ROOT / 'libs'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
        timeout=120,
    )
    found: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def test_loading_every_example_spec_imports_no_torch_transformers_or_vllm():
    assert heavy_modules_imported(_PROBE, str(ROOT / "examples")) == []


_LAUNCHER_PROBE = """
import json, sys
import lecritique.launch.local.launcher, lecritique.study.runner, lecritique.tinybuild.identity
print(json.dumps(sorted(m for m in ("torch", "transformers", "vllm") if m in sys.modules)))
"""


def test_the_launchers_and_the_study_planner_import_no_torch():
    """``lecritique run`` into a finished folder took 4.6 s, 3 of them importing torch and
    transformers through ``tinybuild`` (its package imported the build eagerly, and the launcher
    reads ``tinybuild.identity``); a run's parent process computes nothing with them."""
    assert heavy_modules_imported(_LAUNCHER_PROBE) == []
