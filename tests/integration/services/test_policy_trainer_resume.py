"""A killed policy-trainer service resumes its AdamW state and step from its DCP checkpoint (the
one resume mechanism, :mod:`lecritique.training.checkpoint`); without checkpoints it cannot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from lecritique.launch.local.processes import ManagedProcess, child_environment, service_command
from lecritique.rpc.codec import fill_trajectory_batch
from lecritique.v1 import policy_pb2, policy_pb2_grpc
from lecritique.weights import WeightStore
from tests.unit.training.training_helpers import make_trajectory, save_tiny_llama

REPO_ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def _spec(policy: Path, path: Path, **trainer: Any) -> Path:
    spec = {
        "name": "resume",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(policy)},
        "estimator": {"name": "mean"},
        "policy_trainer": {"optimizer": {"lr": 1e-2}, **trainer},
    }
    path.write_text(json.dumps(spec))
    return path


def _service(spec: Path, out: Path) -> ManagedProcess:
    process = ManagedProcess(
        name="policy-trainer",
        command=service_command(
            "policy-trainer",
            spec=spec,
            experiment="resume",
            weights_dir=out / "weights",
            state_dir=out / "state",
            port_file=out / "port.json",
        ),
        log_path=out / "policy-trainer.log",
        port_file=out / "port.json",
        env=child_environment(REPO_ROOT),
    )
    process.start()
    process.wait_ready(180)
    return process


def _train(process: ManagedProcess, step: int) -> policy_pb2.TrainResponse:
    rng = np.random.default_rng(step)
    request = policy_pb2.TrainRequest(step=step)
    trajectories = [
        make_trajectory(rng, index, prompt_len=3, num_tokens=5 + index % 3, advantage=float(rng.normal()))
        for index in range(6)
    ]
    fill_trajectory_batch(request.trajectories, trajectories)
    with grpc.insecure_channel(process.address) as channel:
        response: policy_pb2.TrainResponse = policy_pb2_grpc.PolicyTrainerStub(channel).Train(
            request, timeout=120
        )
    return response


def _train_malformed(process: ManagedProcess) -> grpc.RpcError:
    """Step 1 with one trajectory's logprobs a token short: refused before anything trains."""
    request = policy_pb2.TrainRequest(step=1)
    rng = np.random.default_rng(1)
    fill_trajectory_batch(
        request.trajectories,
        [make_trajectory(rng, i, prompt_len=3, num_tokens=5, advantage=1.0) for i in range(2)],
    )
    request.trajectories.logprobs.lengths[0] -= 1
    request.trajectories.logprobs.data = request.trajectories.logprobs.data[4:]
    with grpc.insecure_channel(process.address) as channel, pytest.raises(grpc.RpcError) as error:
        policy_pb2_grpc.PolicyTrainerStub(channel).Train(request, timeout=60)
    return error.value


def _published(out: Path) -> dict[str, torch.Tensor]:
    latest = WeightStore(out / "weights").latest("policy")
    assert latest is not None
    return dict(AutoModelForCausalLM.from_pretrained(str(latest[1])).state_dict())


@pytest.mark.parametrize("checkpoint_every", [1, None])
def test_a_killed_trainer_resumes_adamw_state_and_step(tmp_path: Path, checkpoint_every: int | None) -> None:
    policy = save_tiny_llama(tmp_path / "policy", seed=3)
    spec = _spec(policy, tmp_path / "spec.json", checkpoint_every=checkpoint_every)
    reference_dir, resumed_dir = tmp_path / "reference", tmp_path / "resumed"
    reference = _service(spec, reference_dir)
    try:
        refused = _train_malformed(reference)  # and the reference below trains as if it never came
        expected = [_train(reference, step) for step in (1, 2, 3)]
    finally:
        reference.stop()

    first = _service(spec, resumed_dir)
    try:
        _train(first, 1)
        _train(first, 2)
    finally:
        first.kill()  # SIGKILL: no chance to save anything on the way out
    second = _service(spec, resumed_dir)
    try:
        with grpc.insecure_channel(second.address) as channel:
            status = policy_pb2_grpc.PolicyTrainerStub(channel).Status(
                policy_pb2.PolicyTrainerStatusRequest(), timeout=30
            )
        assert status.last_step == 2
        third = _train(second, 3)
    finally:
        second.stop()
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and "'logprobs' has shape" in refused.details()
    assert third.metrics["step"] == expected[2].metrics["step"] == 3.0
    assert third.metrics["loss"] == pytest.approx(
        expected[2].metrics["loss"], rel=1e-6
    )  # same weights before step 3
    differences = [
        float((weight - _published(reference_dir)[name]).abs().max())
        for name, weight in _published(resumed_dir).items()
    ]
    if checkpoint_every is not None:  # the same update, bit for bit, as if never stopped
        assert max(differences) == 0.0
    else:  # published versions carry weights only: AdamW restarted from zero moments
        assert max(differences) > 1e-3
