"""Data parallelism under torchrun (2 CPU processes, gloo) reproduces the single-process run.

DDP and FSDP2 (``fully_shard``) both; FSDP2 also with bf16 mixed precision and activation
checkpointing, publishing HF directories gathered from the shards, and DCP checkpoints that a
different number of ranks resumes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from lecritique.training.distributed import launch_command
from lecritique.training.policy_worker import read_batch_file, write_batch_file
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore
from tests.unit.training.training_helpers import make_trajectory, save_tiny_llama

REPO_ROOT = Path(__file__).resolve().parents[3]
STEPS = 5


def _environment() -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "libs"), str(REPO_ROOT)])
    environment["OMP_NUM_THREADS"] = "1"
    return environment


def _launch(processes: int, program: list[str]) -> None:
    command = launch_command(processes, program)
    result = subprocess.run(
        command, env=_environment(), capture_output=True, text=True, timeout=240, check=False
    )
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
    for name, settings in CONFIGS.items():
        config = {"optimizer": {"lr": 1e-2}, "micro_batch_tokens": 40, **settings}
        (root / f"{name}.json").write_text(json.dumps(config))
    return root


CONFIGS: dict[str, dict[str, Any]] = {
    "ddp": {},
    "fsdp2": {"parallelism": "fsdp2"},
    "fsdp2-bf16-ac": {"parallelism": "fsdp2", "mixed_precision": "bf16", "activation_checkpointing": True},
}
_RUNS: dict[tuple[str, int, str], tuple[dict[str, Any], Path]] = {}


def _policy_run(
    workspace: Path, processes: int, config: str = "ddp", *extra: str
) -> tuple[dict[str, Any], Path]:
    """Train on the batch file (cached per workspace, layout and config); the metrics and the saved policy."""
    key = (str(workspace), processes, config + " ".join(extra))
    if key in _RUNS:
        return _RUNS[key]
    name = f"policy_{processes}_{config}{'_' + str(len(_RUNS)) if extra else ''}"
    out = workspace / name
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
            str(workspace / f"{config}.json"),
            "--metrics-out",
            str(out.with_suffix(".json")),
            "--save-dir",
            str(out),
            "--weights-root",
            str(workspace / f"weights_{name}"),
            *extra,
        ],
    )
    _RUNS[key] = json.loads(out.with_suffix(".json").read_text()), out
    return _RUNS[key]


def _state(directory: Path) -> dict[str, torch.Tensor]:
    return dict(AutoModelForCausalLM.from_pretrained(str(directory)).state_dict())


def _assert_same_steps(one_run: dict[str, Any], other: dict[str, Any], rel: float = 1e-4) -> None:
    assert len(one_run["steps"]) == len(other["steps"])
    for one, two in zip(one_run["steps"], other["steps"], strict=True):
        assert two["loss"] == pytest.approx(one["loss"], rel=rel, abs=1e-6)
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=rel)
        assert two["policy_tokens"] == one["policy_tokens"]


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
    _assert_same_steps(single, double)
    for one, two in zip(single["steps"], double["steps"], strict=True):
        assert two["masked_fraction"] == pytest.approx(one["masked_fraction"])
        assert two["mean_ratio"] == pytest.approx(one["mean_ratio"], rel=1e-4)
    # Rank 0 alone published once per step: versions 0..STEPS-1, the newest equal to the saved policy.
    store = WeightStore(workspace / "weights_policy_2_ddp")
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
    moved = [
        not torch.allclose(w, initial_model.state_dict()[n]) for n, w in single_model.state_dict().items()
    ]
    assert all(moved)


def _critic_run(workspace: Path, processes: int, parallelism: str) -> dict[str, Any]:
    script = str(Path(__file__).with_name("critic_worker_script.py"))
    out = workspace / f"critic_{processes}_{parallelism}.json"
    if not out.exists():
        _launch(
            processes,
            [script, str(workspace / "policy"), str(workspace / "batches.bin"), str(out), parallelism],
        )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.mark.parametrize("parallelism", ["ddp", "fsdp2"])
def test_two_process_critic_matches_one_process(workspace: Path, parallelism: str) -> None:
    single = _critic_run(workspace, 1, "ddp")
    double = _critic_run(workspace, 2, parallelism)
    for one, two in zip(single["steps"], double["steps"], strict=True):
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-4)
        assert two["explained_variance"] == pytest.approx(one["explained_variance"], rel=1e-3, abs=1e-5)
        assert two["trained_tokens"] == one["trained_tokens"]
    assert single["steps"][-1]["loss"] < single["steps"][0]["loss"]
    for one, two in zip(single["predictions"], double["predictions"], strict=True):
        np.testing.assert_allclose(two, one, rtol=1e-3, atol=1e-4)


def test_fsdp2_follows_the_single_process_run_and_publishes_the_same_policy(workspace: Path) -> None:
    single, single_dir = _policy_run(workspace, 1)
    sharded, sharded_dir = _policy_run(workspace, 2, "fsdp2")
    assert sharded["world_size"] == 2
    # Tolerance: float32 sums in a different order (2 shards, reduce-scatter), rel 1e-4.
    _assert_same_steps(single, sharded)
    store = WeightStore(workspace / "weights_policy_2_fsdp2")
    assert store.versions("policy") == list(range(STEPS))
    latest = store.latest("policy")
    assert latest is not None
    # The published directory was gathered parameter by parameter from the shards; it loads with
    # from_pretrained and equals the unsharded single-process model.
    assert (latest[1] / "model.safetensors").is_file()
    published, reference, saved = _state(latest[1]), _state(single_dir), _state(sharded_dir)
    assert published.keys() == reference.keys()
    for name, weight in reference.items():
        torch.testing.assert_close(published[name], weight, rtol=1e-3, atol=1e-5)
        torch.testing.assert_close(saved[name], published[name], rtol=0, atol=0)


def test_fsdp2_with_bf16_and_activation_checkpointing_stays_close(workspace: Path) -> None:
    single, single_dir = _policy_run(workspace, 1)
    mixed, mixed_dir = _policy_run(workspace, 2, "fsdp2-bf16-ac")
    # bf16 forward/backward (float32 master weights and reduction): losses within 2% here.
    _assert_same_steps(single, mixed, rel=2e-2)
    reference, trained, initial = _state(single_dir), _state(mixed_dir), _state(workspace / "policy")
    for name, weight in reference.items():
        # Adam moves weights by about +-lr whatever the gradient's size, so a few tiny bf16
        # gradients flip sign: compare whole updates (measured: within 12% of the update's norm).
        update, mixed_update = weight - initial[name], trained[name] - initial[name]
        assert float((mixed_update - update).norm() / update.norm()) < 0.25, name
        assert trained[name].dtype == torch.float32  # master weights stay float32


def test_a_two_rank_checkpoint_resumes_in_one_process(workspace: Path) -> None:
    single, single_dir = _policy_run(workspace, 1)
    checkpoints = workspace / "checkpoints_2_to_1"
    first, _ = _policy_run(workspace, 2, "fsdp2", "--checkpoint-dir", str(checkpoints), "--max-steps", "3")
    assert len(first["steps"]) == 3
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-00000002", "step-00000003"]
    resumed, resumed_dir = _policy_run(workspace, 1, "ddp", "--checkpoint-dir", str(checkpoints), "--resume")
    # The resumed process starts at step 4 with the AdamW moments of the two ranks: its steps and
    # final weights are those of the uninterrupted single-process run (a fresh optimiser's first
    # step would move every weight by about lr = 1e-2 instead).
    assert resumed["world_size"] == 1 and resumed["first_step"] == 4
    _assert_same_steps({"steps": single["steps"][3:]}, resumed)
    reference, final = _state(single_dir), _state(resumed_dir)
    for name, weight in reference.items():
        torch.testing.assert_close(final[name], weight, rtol=1e-4, atol=1e-6)
