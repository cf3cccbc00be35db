"""Weights broadcast from a trainer's rank 0 to replicas over gloo, between real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from lecritique.training.distributed import launch_command
from lecritique.weights import WeightStore
from lecritique.weights.broadcast import ENDPOINT_FILE, TensorSpec, check_manifest, read_endpoint
from tests.unit.training.training_helpers import save_tiny_llama

REPO_ROOT = Path(__file__).resolve().parents[3]
WORKER = str(Path(__file__).with_name("broadcast_worker.py"))
PARAMETERS = 12  # tensors of the tiny Llama (no tied head)


def _environment() -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "libs"), str(REPO_ROOT)])
    environment["OMP_NUM_THREADS"] = "1"
    return environment


def _run(
    tmp_path: Path,
    receivers: int,
    steps: int,
    settings: dict[str, Any],
    trainer_processes: int = 1,
    replica_dtype: str = "float32",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    model_dir = save_tiny_llama(tmp_path / "policy", seed=5)
    root = tmp_path / "weights"
    replicas = [
        subprocess.Popen(
            [
                sys.executable,
                WORKER,
                "receive",
                str(root),
                str(model_dir),
                str(tmp_path / f"replica{i}"),
                replica_dtype,
            ],
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(receivers)
    ]
    command = launch_command(
        trainer_processes,
        [
            WORKER,
            "publish",
            str(root),
            str(model_dir),
            str(receivers),
            str(steps),
            json.dumps(settings),
            str(tmp_path / "out"),
        ],
    )
    trainer = subprocess.run(
        command, env=_environment(), capture_output=True, text=True, timeout=300, check=False
    )
    outputs = [replica.communicate(timeout=120)[0] for replica in replicas]
    assert trainer.returncode == 0, trainer.stderr[-5000:]
    assert all(replica.returncode == 0 for replica in replicas), outputs
    published = json.loads((tmp_path / "out" / "publisher.json").read_text())
    received = [
        json.loads((tmp_path / f"replica{i}" / "receiver.json").read_text()) for i in range(receivers)
    ]
    return published, received


def _state(directory: Path) -> dict[str, torch.Tensor]:
    return dict(AutoModelForCausalLM.from_pretrained(str(directory)).state_dict())


@pytest.mark.parametrize("trainer_processes", [1, 2])
def test_replicas_end_with_the_trainers_weights_and_only_changed_tensors_travel(
    tmp_path: Path, trainer_processes: int
) -> None:
    settings = {
        "trainer": {"optimizer": {"lr": 1e-2}, "parallelism": "fsdp2"},
        "freeze_embeddings": True,
        "persist_every": 100,
    }
    published, received = _run(
        tmp_path, receivers=2, steps=3, settings=settings, trainer_processes=trainer_processes
    )
    # Version 0 was written to the store (the first publish persists), the others only broadcast.
    assert published["versions"] == [0, 1, 2]
    assert WeightStore(tmp_path / "weights").versions("policy") == [0]
    endpoint = read_endpoint(tmp_path / "weights" / "policy")
    assert (
        endpoint is not None
        and endpoint.generation == 1
        and endpoint.receivers == 2
        and endpoint.backend == "gloo"
    )
    trainer = _state(tmp_path / "out" / "trainer")
    initial = _state(tmp_path / "policy")
    for index, replica in enumerate(received):
        assert replica["versions"] == [0, 1, 2]
        # The first version of a generation sends every tensor; then the frozen embedding stays home.
        assert replica["tensors_received"] == PARAMETERS + 2 * (PARAMETERS - 1)
        state = _state(tmp_path / f"replica{index}")
        for name, weight in trainer.items():
            torch.testing.assert_close(state[name], weight, rtol=0, atol=0)
        torch.testing.assert_close(
            state["model.embed_tokens.weight"], initial["model.embed_tokens.weight"], rtol=0, atol=0
        )
        assert not torch.equal(state["lm_head.weight"], initial["lm_head.weight"])


def test_bf16_weights_travel_to_a_bf16_replica_as_the_trainers_cast(tmp_path: Path) -> None:
    """publish_dtype bfloat16: the manifest, the bytes and the replica's tensors are the trainer's p.to(bfloat16)."""
    settings = {"trainer": {"optimizer": {"lr": 1e-2}}, "persist_every": 100, "publish_dtype": "bfloat16"}
    published, received = _run(tmp_path, receivers=1, steps=2, settings=settings, replica_dtype="bfloat16")
    assert published["versions"] == [0, 1] and received[0]["versions"] == [0, 1]
    trainer = _state(tmp_path / "out" / "trainer")
    replica = _state(tmp_path / "replica0")
    for name, weight in trainer.items():
        assert weight.dtype == torch.float32 and replica[name].dtype == torch.bfloat16
        assert torch.equal(replica[name], weight.to(torch.bfloat16)), name
    # Version 0 went through the store too: written in bf16, half the float32 bytes.
    from safetensors.torch import load_file

    [file] = WeightStore(tmp_path / "weights").path("policy", 0).glob("*.safetensors")
    assert {tensor.dtype for tensor in load_file(str(file)).values()} == {torch.bfloat16}


def test_a_replica_missing_from_the_group_makes_the_trainer_write_to_the_store(tmp_path: Path) -> None:
    settings = {"trainer": {"optimizer": {"lr": 1e-2}}, "persist_every": 100}
    model_dir = save_tiny_llama(tmp_path / "policy", seed=5)
    root = tmp_path / "weights"
    environment = _environment()
    # One replica expected, none comes: each publish waits join_timeout (1 s), then writes the version.
    command = [
        sys.executable,
        WORKER,
        "publish",
        str(root),
        str(model_dir),
        "1",
        "2",
        json.dumps({**settings, "join_timeout": 1}),
        str(tmp_path / "out"),
    ]
    result = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert WeightStore(root).versions("policy") == [0, 1]
    assert (root / "policy" / ENDPOINT_FILE).is_file()


def test_a_manifest_that_does_not_fit_the_replica_is_refused() -> None:
    tensors = {"a": torch.zeros(2, 3), "b": torch.zeros(4)}
    check_manifest([TensorSpec("a", "bfloat16", (2, 3))], tensors)  # dtypes may differ
    with pytest.raises(ValueError, match="missing"):
        check_manifest([TensorSpec("c", "float32", (1,))], tensors)
    with pytest.raises(ValueError, match="shape"):
        check_manifest([TensorSpec("b", "float32", (5,))], tensors)


def test_the_spec_names_the_transport_per_trainer_and_refuses_broadcast_into_vllm() -> None:
    from lecritique.config.experiment import SpecError, parse_spec
    from tests.helm_support import spec_data

    spec = parse_spec(
        spec_data(
            policy_trainer={"weight_transport": {"kind": "broadcast", "persist_every": 5}},
            critic={"kind": "discriminative", "weight_transport": {"kind": "broadcast", "backend": "gloo"}},
        )
    )
    assert (
        spec.policy_trainer.weight_transport.kind == "broadcast"
        and spec.policy_trainer.weight_transport.persist_every == 5
    )
    assert parse_spec(spec_data()).policy_trainer.weight_transport.kind == "shared_volume"
    with pytest.raises(SpecError, match="rollout.engine.kind 'hf'"):
        parse_spec(
            spec_data(
                rollout={"engine": {"kind": "vllm"}},
                policy_trainer={"weight_transport": {"kind": "broadcast"}},
            )
        )
    with pytest.raises(SpecError, match="weight_transport"):
        parse_spec(spec_data(policy_trainer={"weight_transport": {"kind": "carrier-pigeon"}}))
