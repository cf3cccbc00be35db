"""A fresh install of this tree registers every service (pip in a new virtual environment: a
process; the entry-point table itself is checked in tests/unit/architecture/test_service_entry_points.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from lecritique.cli.serve import SERVICE_ENTRY_POINTS
from tests.unit.architecture.conftest import ROOT

_RESOLVE_EVERY_SERVICE = """
import json
from lecritique.cli.serve import Service, service_entry
print(json.dumps({s.value: [f"{f.__module__}:{f.__name__}", f.__code__.co_filename] for s in Service for f in [service_entry(s)]}))
"""


def test_a_fresh_install_of_this_tree_registers_every_service(tmp_path):
    """``pip install`` of this checkout (not the shared venv's editable install, which may point at
    another tree) writes the entry points, and ``lecritique serve`` finds each service through them."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("libs", "services"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    result = subprocess.run(
        [sys.executable, "-c", _RESOLVE_EVERY_SERVICE],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(target)},
    )
    resolved = json.loads(result.stdout.strip().splitlines()[-1])
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
        SERVICE_ENTRY_POINTS
    ]
    assert {name: target_name for name, (target_name, _) in resolved.items()} == declared
    assert all(Path(filename).is_relative_to(target) for _, filename in resolved.values())
