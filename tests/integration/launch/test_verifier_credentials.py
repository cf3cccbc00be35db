"""The environment verifier holds no credential it does not need (issue #37).

It scores what the policy writes, and reasoning-gym answers ran as code in it: an answer read
``REDIS_URL`` from its environment and overwrote another tenant's record. It uses no Redis, no
LLM and no tracker, so it gets none of their credentials: the local launcher starts it with an
allow-listed environment (read back from ``/proc/<pid>/environ`` of the real process), and its
Kubernetes pod carries no Redis variables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lecritique.config.experiment import parse_spec
from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.render import render_experiment_objects
from lecritique.launch.local.launcher import LocalLauncher
from tests.helm_support import launcher_defaults, spec_data

CANARIES = {
    "OPENAI_API_KEY": "canary-openai-key",
    "AWS_SECRET_ACCESS_KEY": "canary-aws-secret",
    "LECRITIQUE_API_TOKENS": "canary-api-token-hashes",
    "ALICE_LLM_KEY": "canary-tenant-key",
}
REDIS_PASSWORD = "canary-redis-password"


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)


def test_the_local_verifier_process_gets_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LECRITIQUE_DATASET_ROOTS", str(tmp_path / "datasets"))
    spec = parse_spec(spec_data(critic=None, estimator={"name": "rloo"}))
    launcher = LocalLauncher(
        spec, tmp_path / "run", redis_url=f"redis://:{REDIS_PASSWORD}@127.0.0.1:9/0", experiment_id="exp-1"
    )
    launcher.out_dir.mkdir(parents=True)
    launcher.spec_path.write_text(spec.model_dump_json())
    try:
        verifier = launcher._service("environment", "environment")
        verifier.wait_ready(120)
        assert verifier.process is not None
        seen = _environ(verifier.process.pid)
    finally:
        launcher.stop()
    leaked = sorted(
        name for name, value in seen.items() if REDIS_PASSWORD in value or value in CANARIES.values()
    )
    assert leaked == []
    assert "REDIS_URL" not in seen
    assert seen["LECRITIQUE_DATASET_ROOTS"] == str(tmp_path / "datasets")
    assert "PYTHONPATH" in seen and "PATH" in seen


def test_the_other_local_services_still_reach_redis(tmp_path: Path) -> None:
    spec = parse_spec(spec_data(critic=None, estimator={"name": "rloo"}))
    url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:9/0"
    launcher = LocalLauncher(spec, tmp_path / "run", redis_url=url, experiment_id="exp-1")
    assert launcher.service_environment("policy-trainer")["REDIS_URL"] == url
    assert "REDIS_URL" not in launcher.service_environment("environment")


def _containers(component: str) -> list[dict[str, object]]:
    objects = render_experiment_objects(
        parse_spec(spec_data()), "exp-1", ChartDefaults.model_validate(launcher_defaults())
    )
    workloads = [
        o
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet", "Job")
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    assert workloads, component
    return [c for o in workloads for c in o["spec"]["template"]["spec"]["containers"]]


def test_the_verifier_pod_carries_no_redis_credentials() -> None:
    for container in _containers("environment-verifier"):
        names = {item["name"] for item in container["env"]}  # type: ignore[attr-defined]
        assert not names & {"REDIS_URL", "LECRITIQUE_REDIS_PASSWORD"}, names
        assert not any("secretKeyRef" in item.get("valueFrom", {}) for item in container["env"])  # type: ignore[attr-defined]
    for component in ("orchestrator", "rollout", "policy-trainer", "value-trainer", "value-evaluator"):
        for container in _containers(component):
            assert "REDIS_URL" in {item["name"] for item in container["env"]}  # type: ignore[attr-defined]
