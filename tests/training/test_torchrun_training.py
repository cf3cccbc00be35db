"""Data parallelism under torchrun (2 CPU processes, gloo) reproduces the single-process run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from training_helpers import make_trajectory, save_tiny_llama
from transformers import AutoModelForCausalLM

from lecritique.training.distributed import launch_command
from lecritique.training.policy_worker import read_batch_file, write_batch_file
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS = 5


def _environment() -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "libs"), str(REPO_ROOT)])
    environment["OMP_NUM_THREADS"] = "1"
    return environment


def _launch(processes: int, program: list[str]) -> None:
    command = launch_command(processes, program)
    result = subprocess.run(command, env=_environment(), capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def _batches(seed: int, count: int) -> list[list[Trajectory]]:
    """Varied lengths, off-policy rollout logprobs (so the DPPO mask fires), mixed advantages."""
    rng = np.random.default_rng(seed)
    return [
        [
            make_trajectory(
                rng,
                index,
                prompt_len=int(rng.integers(2, 6)),
                num_tokens=int(rng.integers(4, 16)),
                advantage=float(rng.normal()),
                reward=float(rng.integers(0, 2)),
                env_tokens=2 if index % 4 == 3 else 0,
                critic_context_len=index % 3,
            )
            for index in range(7)  # odd: the two ranks get different numbers of trajectories
        ]
        for _ in range(count)
    ]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torchrun")
    save_tiny_llama(root / "policy", seed=7)
    write_batch_file(root / "batches.bin", _batches(seed=11, count=STEPS))
    config = {"optimizer": {"lr": 1e-2}, "micro_batch_tokens": 40}
    (root / "config.json").write_text(json.dumps(config))
    return root


def _policy_run(workspace: Path, processes: int) -> tuple[dict[str, Any], Path]:
    out = workspace / f"policy_{processes}"
    _launch(
        processes,
        [
            "-m",
            "lecritique.training.policy_worker",
            "--model-dir",
            str(workspace / "policy"),
            "--batches",
            str(workspace / "batches.bin"),
            "--config",
            str(workspace / "config.json"),
            "--metrics-out",
            str(out.with_suffix(".json")),
            "--save-dir",
            str(out),
            "--weights-root",
            str(workspace / f"weights_{processes}"),
        ],
    )
    return json.loads(out.with_suffix(".json").read_text()), out


def test_batch_file_round_trip(workspace: Path) -> None:
    batches = read_batch_file(workspace / "batches.bin")
    assert [len(batch) for batch in batches] == [7] * STEPS
    expected = _batches(seed=11, count=STEPS)
    for read, written in zip(batches[0], expected[0], strict=True):
        assert read.to_bytes() == written.to_bytes()
    (workspace / "bad.bin").write_bytes(b"nonsense")
    with pytest.raises(ValueError, match="bad magic"):
        read_batch_file(workspace / "bad.bin")


def test_two_processes_follow_the_single_process_loss_trajectory(workspace: Path) -> None:
    single, single_dir = _policy_run(workspace, 1)
    double, double_dir = _policy_run(workspace, 2)
    assert (single["world_size"], double["world_size"]) == (1, 2)
    assert len(single["steps"]) == len(double["steps"]) == STEPS
    losses = [step["loss"] for step in single["steps"]]
    assert len(set(np.round(losses, 6))) == STEPS  # the weights really move between steps
    assert sum(step["masked_fraction"] for step in single["steps"]) > 0  # the DPPO mask is exercised
    for one, two in zip(single["steps"], double["steps"], strict=True):
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-4, abs=1e-6)
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)
        assert two["policy_tokens"] == one["policy_tokens"]
        assert two["masked_fraction"] == pytest.approx(one["masked_fraction"])
        assert two["mean_ratio"] == pytest.approx(one["mean_ratio"], rel=1e-4)
    # Rank 0 alone published once per step: versions 0..STEPS-1, the newest equal to the saved policy.
    store = WeightStore(workspace / "weights_2")
    assert store.versions("policy") == list(range(STEPS))
    assert [step["policy_version"] for step in double["steps"]] == list(range(STEPS))
    latest = store.latest("policy")
    assert latest is not None and latest[0] == STEPS - 1
    published_model = AutoModelForCausalLM.from_pretrained(str(latest[1]))
    # Rank 0 saved the final policy; it matches the single-process one.
    single_model = AutoModelForCausalLM.from_pretrained(str(single_dir))
    double_model = AutoModelForCausalLM.from_pretrained(str(double_dir))
    initial_model = AutoModelForCausalLM.from_pretrained(str(workspace / "policy"))
    for name, weight in single_model.state_dict().items():
        torch.testing.assert_close(double_model.state_dict()[name], weight, rtol=1e-3, atol=1e-4)
        torch.testing.assert_close(published_model.state_dict()[name], double_model.state_dict()[name])
    moved = [not torch.allclose(w, initial_model.state_dict()[n]) for n, w in single_model.state_dict().items()]
    assert all(moved)


def test_two_process_critic_matches_one_process(workspace: Path) -> None:
    script = str(Path(__file__).with_name("critic_worker_script.py"))
    results = []
    for processes in (1, 2):
        out = workspace / f"critic_{processes}.json"
        _launch(processes, [script, str(workspace / "policy"), str(workspace / "batches.bin"), str(out)])
        results.append(json.loads(out.read_text()))
    single, double = results
    for one, two in zip(single["steps"], double["steps"], strict=True):
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-4)
        assert two["explained_variance"] == pytest.approx(one["explained_variance"], rel=1e-3, abs=1e-5)
        assert two["trained_tokens"] == one["trained_tokens"]
    assert single["steps"][-1]["loss"] < single["steps"][0]["loss"]
    for one, two in zip(single["predictions"], double["predictions"], strict=True):
        np.testing.assert_allclose(two, one, rtol=1e-3, atol=1e-4)
