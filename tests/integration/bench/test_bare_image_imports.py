"""The GPU scripts start on a bare GPU image (issue #38): torch, transformers, safetensors, numpy,
rich, pyyaml, tokenizers, grpcio and protobuf, what those require themselves, and the pure wheels
``bench/gpu_check_wheels.sh`` carries. Every other third-party import is blocked in a subprocess
that imports the scripts and the training, engine and weights modules they load."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

IMAGE_DISTRIBUTIONS = (
    "torch",
    "transformers",
    "safetensors",
    "numpy",
    "rich",
    "pyyaml",
    "tokenizers",
    "grpcio",
    "protobuf",
)
"""What the GPU machine's image holds (issue #38)."""

MODULES = (
    "gpu_check",
    "gpu_check_procs",
    "gpu_perf",
    "gpu_table",
    "lecritique.training.checkpoint",
    "lecritique.training.collate",
    "lecritique.training.config",
    "lecritique.training.critic_trainer",
    "lecritique.training.distillation",
    "lecritique.training.distributed",
    "lecritique.training.engine",
    "lecritique.training.fsdp",
    "lecritique.training.kernels",
    "lecritique.training.policy_loss",
    "lecritique.training.policy_trainer",
    "lecritique.training.policy_worker",
    "lecritique.training.weight_sync",
    "lecritique.engines.hf",
    "lecritique.weights",
    "lecritique.weights.broadcast",
    "lecritique.weights.safetensors_stream",
    "lecritique.models.tiny_arch",
    "lecritique.models.critic",
)

_BUILD_SITE = r"""
import importlib.metadata as md, os, sys
from packaging.requirements import Requirement

site = sys.argv[1]
allowed, queue = {}, list(IMAGE + CARRIED)
while queue:
    name = queue.pop()
    key = name.lower().replace("_", "-")
    if key in allowed:
        continue
    try:
        distribution = md.distribution(name)
    except md.PackageNotFoundError:
        continue  # not installed here, so nothing it could provide
    allowed[key] = distribution
    for line in distribution.requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            queue.append(requirement.name)
for distribution in allowed.values():
    tops = {str(path).split("/")[0] for path in distribution.files or () if not str(path).startswith("..")}
    for top in tops:
        source = os.path.join(str(distribution.locate_file("")), top)
        target = os.path.join(site, top)
        if os.path.exists(source) and not os.path.exists(target) and not top.endswith(".pth"):
            os.symlink(source, target)
print(sorted(allowed))
"""

_PROBE = r"""
import importlib, sys
failures = []
for module in MODULES:
    try:
        importlib.import_module(module)
    except Exception as error:
        failures.append(f"{module}: {type(error).__name__}: {error}")
print("FAILURES", failures)
sys.exit(1 if failures else 0)
"""


def carried_wheels() -> list[str]:
    """The distributions ``bench/gpu_check_wheels.sh`` downloads (its ``$(pin NAME)`` arguments)."""
    script = (ROOT / "bench" / "gpu_check_wheels.sh").read_text()
    return re.findall(r"\$\(pin ([A-Za-z0-9_.-]+)\)", script)


def test_carried_wheels_are_listed() -> None:
    assert "pydantic" in carried_wheels()


def test_gpu_scripts_import_on_the_bare_image(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            f"IMAGE = {list(IMAGE_DISTRIBUTIONS)!r}\nCARRIED = {carried_wheels()!r}\n" + _BUILD_SITE,
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    assert "redis" not in built.stdout and "torch" in built.stdout, built.stdout
    # -I -S: no user or venv site-packages; only the standard library, the filtered site and the project.
    path = [str(site), str(ROOT / "libs"), str(ROOT / "bench")]
    code = f"import sys\nsys.path[1:1] = {path!r}\nMODULES = {list(MODULES)!r}\n" + _PROBE
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
