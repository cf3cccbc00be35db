"""A real environment-verifier process on a loopback socket, for the time-limit tests (issue #46)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import yaml

from lecritique.envs.base import Task
from lecritique.rpc.codec import task_from_proto, task_to_proto
from lecritique.v1 import common_pb2, environment_pb2, environment_pb2_grpc

ROOT = Path(__file__).resolve().parents[3]


class Verifier:
    """A stub on a running verifier process."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = environment_pb2_grpc.EnvironmentVerifierStub(self.channel)

    def tasks(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        response = self.stub.SampleTasks(
            environment_pb2.SampleTasksRequest(n=n, split=split, seed=seed), timeout=120
        )
        return [task_from_proto(task) for task in response.tasks]

    def score(self, items: list[tuple[Task, str]], timeout: float = 120) -> list[tuple[float, str]]:
        request = environment_pb2.ScoreRequest(
            items=[environment_pb2.ScoreItem(task=task_to_proto(t), completion=c) for t, c in items]
        )
        response = self.stub.Score(request, timeout=timeout)
        return [(result.reward, result.diagnostic) for result in response.results]

    def score_future(self, items: list[tuple[Task, str]], timeout: float = 120) -> Any:
        request = environment_pb2.ScoreRequest(
            items=[environment_pb2.ScoreItem(task=task_to_proto(t), completion=c) for t, c in items]
        )
        return self.stub.Score.future(request, timeout=timeout)

    def info(self) -> dict[str, Any]:
        reply = self.stub.Info(common_pb2.ServiceInfoRequest(), timeout=30)
        details: dict[str, Any] = json.loads(reply.details_json)
        return details

    def metrics(self, metrics_port: int) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
            return str(reply.read().decode())


@contextmanager
def verifier_process(
    tmp: Path,
    environment: dict[str, Any],
    answer_seconds: float = 4.0,
    workers: int = 2,
    root: Path = ROOT,
) -> Iterator[tuple[Verifier, int]]:
    """``lecritique serve environment`` for ``environment`` as its own process: (stub, metrics port)."""
    spec = {
        "name": "verifier-limits",
        "environment": environment,
        "policy": {"path": str(tmp / "no-policy")},
        "estimator": {"name": "mean"},
    }
    spec_path = tmp / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    port_file = tmp / "ports.json"
    variables = dict(os.environ)
    variables.update(
        PYTHONPATH=os.pathsep.join([str(root / "libs"), str(root), str(ROOT)]),
        LECRITIQUE_ANSWER_SECONDS=str(answer_seconds),
        LECRITIQUE_SCORING_WORKERS=str(workers),
    )
    log = (tmp / "verifier.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lecritique",
            "serve",
            "environment",
            "--spec",
            str(spec_path),
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--host",
            "127.0.0.1",
            "--port-file",
            str(port_file),
        ],
        env=variables,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp,
    )
    try:
        deadline = time.monotonic() + 300
        while not port_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the verifier did not start:\n{(tmp / 'verifier.log').read_text()[-3000:]}"
                )
            time.sleep(0.2)
        ports = json.loads(port_file.read_text())
        verifier = Verifier(f"127.0.0.1:{ports['grpc']}")
        yield verifier, int(ports["metrics"])
        verifier.channel.close()
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
