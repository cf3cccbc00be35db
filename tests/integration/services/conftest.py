"""Helpers of the integration tests that run the real services as local processes (their tiny
policy is ``tiny_policy``, tests/integration/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from lecritique.config import parse_spec
from lecritique.launch.local.launcher import LocalLauncher


def pipeline_spec(policy: Path, **sections: Any) -> dict[str, Any]:
    """A small, fast experiment on 1-2-empty-cell 4x4 Sudoku; ``sections`` override the defaults."""
    spec: dict[str, Any] = {
        "name": "pipeline",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(policy)},
        "rollout": {"group_size": 4, "tasks_per_step": 4, "sampling": {"max_tokens": 8}},
        "estimator": {"name": "tether", "ema_decay": 0.5},
        "critic": {"context": "none", "warmup_updates": 2, "optimizer": {"lr": 1e-3}},
        "policy_trainer": {"optimizer": {"lr": 1e-4}},
        "orchestrator": {"steps": 2},
    }
    for key, value in sections.items():
        if value is None:
            spec.pop(key, None)
        elif key != "estimator" and isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


@contextmanager
def running_services(
    spec: dict[str, Any], out: Path, extra_env: dict[str, str] | None = None
) -> Iterator[LocalLauncher]:
    launcher = LocalLauncher(parse_spec(spec), out)
    if extra_env:
        launcher.env.update(extra_env)
    try:
        launcher.start_services()
        yield launcher
    finally:
        launcher.stop()


def run_experiment(
    spec: dict[str, Any], out: Path, extra_env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Start every service, run the orchestrator to the end, stop everything; return metrics rows."""
    with running_services(spec, out, extra_env) as launcher:
        launcher.start_orchestrator()
        code = launcher.wait()
        assert code == 0, (out / "logs" / "orchestrator.log").read_text()[-4000:]
    return read_metrics(out)


def read_metrics(out: Path) -> list[dict[str, Any]]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path
