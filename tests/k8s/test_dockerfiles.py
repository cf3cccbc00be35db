"""A pinned Dockerfile per service: CUDA base for GPU services, slim Python for CPU ones, non-root, locked deps.

No container engine runs here, so this reads the Dockerfiles; it checks what can be checked
without building: pinned bases, the constraints file, the non-root user the chart's
securityContext expects, the entry points the chart's commands and ``lecritique serve`` accept,
and that every COPY source exists.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from lecritique.launch.components import COMPONENTS, Component
from lecritique.launch.kubernetes import RUN_AS_USER
from tests.helm_support import CHART, ROOT

GPU_SERVICES = {"rollout": "rollout", "value_evaluator": "value-evaluator", "value_trainer": "value-trainer", "policy_trainer": "policy-trainer"}
CPU_SERVICES = {"environment_verifier": "environment-verifier", "api": "api"}
ALL = {**GPU_SERVICES, **CPU_SERVICES}


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    return instructions[last_from:]


@pytest.mark.parametrize("folder", sorted(ALL))
def test_every_service_has_a_pinned_non_root_dockerfile(folder: str) -> None:
    path = ROOT / "services" / folder / "Dockerfile"
    instructions = _instructions(path)
    images = [rest.split()[0] for keyword, rest in instructions if keyword == "FROM" and not rest.split()[0].isidentifier()]
    for image in images:
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest" and re.search(r"\d+\.\d+", tag), f"{path}: base image {image} is not pinned"
    final = _final_stage(instructions)
    base = final[0][1].split()[0]
    if folder in GPU_SERVICES:
        assert base.startswith("nvidia/cuda:") and "runtime" in base, base
    else:
        assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base), base
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users and users[-1] == f"{RUN_AS_USER}:{RUN_AS_USER}", users
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert "--constraint requirements/constraints.txt" in runs
    assert ("vllm==0.32.0" in runs) == (folder == "rollout")
    for keyword, rest in instructions:
        if keyword == "COPY" and not rest.startswith("--from"):
            for source in shlex.split(rest)[:-1]:
                assert (ROOT / source).exists(), f"{path}: COPY source {source} does not exist"


@pytest.mark.parametrize("folder", sorted(ALL))
def test_entry_points_match_the_commands_the_platform_runs(folder: str) -> None:
    final = _final_stage(_instructions(ROOT / "services" / folder / "Dockerfile"))
    [entrypoint] = [yaml.safe_load(rest) for keyword, rest in final if keyword == "ENTRYPOINT"]
    if folder == "api":
        deployment = (CHART / "templates" / "api" / "deployment.yaml").read_text()
        assert entrypoint[:3] == ["uvicorn", "services.api.app:create_app_from_env", "--factory"]
        assert "services.api.app:create_app_from_env" in deployment
        return
    component = Component(ALL[folder])
    assert entrypoint == ["lecritique", "serve", COMPONENTS[component].serve_name]


def test_chart_images_name_the_service_images() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for folder, image in ALL.items():
        key = {"api": "api", "environment_verifier": "environmentVerifier", "rollout": "rollout", "value_evaluator": "valueEvaluator",
               "value_trainer": "valueTrainer", "policy_trainer": "policyTrainer"}[folder]
        assert values[key]["image"]["repository"] == f"ghcr.io/lecritique/{image}"
        assert f"-t ghcr.io/lecritique/{image}:" in (ROOT / "services" / folder / "Dockerfile").read_text()
    # The orchestrator Job runs `lecritique orchestrate` from the API image (CPU, the whole package).
    assert values["orchestrator"]["image"]["repository"] == "ghcr.io/lecritique/api"
