"""``bench/pipeline.py``'s variants (the benchmark itself is ``make bench-pipeline``): every variant is
a valid spec, the same but for its estimator and critic, and the budget variant asks for 4 critic
updates per step with a replay that can feed them, so the spec check passes and no step starves."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from lecritique.config import parse_spec
from lecritique.config.critic_budget import spec_update_budget
from lecritique.config.findings import warning_texts
from lecritique.launch.local.launcher import REPO_ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline", REPO_ROOT / "bench" / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_the_budget_variant_is_the_vf_with_four_updates_per_step(bench, monkeypatch, tmp_path: Path) -> None:
    # The policy is resolved to a path: no tiny build in this test.
    monkeypatch.setattr(
        bench,
        "with_tiny_policy_built",
        lambda spec: spec.model_copy(
            update={"policy": spec.policy.model_copy(update={"tiny": None, "path": str(tmp_path)})}
        ),
    )
    variants = bench.variants(REPO_ROOT / "examples" / "sudoku-mini-pvf.yaml", steps=3)
    assert list(variants) == ["MEAN", "VF", "VF, 4 updates/step", "TETHER", "MEAN, one process"]
    vf, budget = (parse_spec(variants[label][0]) for label in ("VF", "VF, 4 updates/step"))
    assert budget.critic.updates_per_step == 4 and vf.critic.updates_per_step == 0
    assert budget.critic.context == "none" and budget.estimator.name == "value"
    assert budget.orchestrator.steps == 3 and budget.rollout == vf.rollout
    assert budget.critic.model_copy(update={"updates_per_step": 0, "replay": vf.critic.replay}) == vf.critic
    assert spec_update_budget(budget).guaranteed >= 4 and warning_texts(budget) == []
    summary = bench._summary(
        [
            {
                "step_seconds": 1.0,
                "train_seconds": 0.5,
                "batch_wait_seconds": 0.1,
                "rollout_seconds": 0.4,
                "critic_updates_done": updates,
            }
            for updates in (9, 4, 6)
        ]
    )
    assert summary["updates"] == 5.0 and summary["rate"] == 1.0
