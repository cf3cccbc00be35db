"""The value-trainer service in two torchrun ranks (gloo) trains and publishes the critic one process would.

Real processes: ``lecritique serve value-trainer`` under ``torch.distributed.run``, a real Redis
replay stream, the weight store on disk. Rank 0 samples the stream and broadcasts each batch;
both ranks step and publish. The batch is the whole stream (8 trajectories, reused twice), so
one process and two ranks see the same two batches and must publish the same critic versions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from lecritique.launch.local.processes import ManagedProcess, child_environment, service_command
from lecritique.replay import ReplayBuffer
from lecritique.replay.config import ReplayBounds
from lecritique.v1 import common_pb2, value_pb2, value_pb2_grpc
from lecritique.weights import WeightStore
from tests.unit.training.training_helpers import make_trajectory, save_tiny_llama

REPO_ROOT = Path(__file__).resolve().parents[3]
BATCH = 8
REPLAY = ReplayBounds(capacity=64, max_reuse=2)
pytestmark = pytest.mark.slow


def _spec(policy: Path, path: Path, **critic: Any) -> Path:
    spec = {
        "name": "critic-ranks",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(policy)},
        "estimator": {"name": "value"},
        "critic": {
            "batch_size": BATCH,
            "optimizer": {"lr": 1e-2},
            "micro_batch_tokens": 40,
            "replay": REPLAY.model_dump(),
            **critic,
        },
    }
    path.write_text(json.dumps(spec))
    return path


def _trajectories(seed: int = 3) -> list[Any]:
    rng = np.random.default_rng(seed)
    return [
        make_trajectory(
            rng,
            index,
            prompt_len=int(rng.integers(2, 5)),
            num_tokens=int(rng.integers(3, 9)),
            reward=float((index + seed) % 2),
            critic_context_len=index % 3,
        )
        for index in range(BATCH)
    ]


def _run(root: Path, embedded_redis: Any, name: str, seed: int = 3, **critic: Any) -> dict[str, Any]:
    """Start the service on a stream of 8 trajectories, wait for its two updates, stop it.

    A second call with the same ``root`` and ``name`` restarts it on the same weights and state.
    """
    out = root / name
    if not out.exists():
        out.mkdir()
        WeightStore(out / "weights").publish("policy", save_tiny_llama(out / "policy", seed=7))
    spec = _spec(out / "policy", out / "spec.json", **critic)
    redis = embedded_redis.client()
    ReplayBuffer(redis, name, **REPLAY.model_dump()).push(_trajectories(seed), policy_version=0)
    command = service_command(
        "value-trainer",
        spec=spec,
        experiment=name,
        weights_dir=out / "weights",
        state_dir=out / "state",
        port_file=out / "port.json",
        processes=int(critic.get("processes", 1)),
    )
    process = ManagedProcess(
        name=name,
        command=command,
        log_path=out / "value-trainer.log",
        port_file=out / "port.json",
        env={**child_environment(REPO_ROOT), "REDIS_URL": embedded_redis.url},
    )
    process.start()
    try:
        process.wait_ready(240)
        with grpc.insecure_channel(process.address) as channel:
            stub = value_pb2_grpc.ValueTrainerStub(channel)
            deadline = time.monotonic() + 240
            status = stub.Status(value_pb2.ValueTrainerStatusRequest(), timeout=30)
            while status.updates < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
                status = stub.Status(value_pb2.ValueTrainerStatusRequest(), timeout=30)
            info = json.loads(stub.Info(common_pb2.ServiceInfoRequest(), timeout=30).details_json)
    finally:
        code = process.stop(grace=60)
    log = (out / "value-trainer.log").read_text()
    (out / "value-trainer.log").rename(out / f"value-trainer-{time.monotonic_ns()}.log")
    assert status.updates == 2, log[-4000:]
    return {"status": status, "info": info, "code": code, "log": log, "store": WeightStore(out / "weights")}


def _critic(store: WeightStore, version: int) -> dict[str, torch.Tensor]:
    return load_file(store.path("critic", version) / "model.safetensors")


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("critic-ranks")


@pytest.fixture(scope="module")
def single(runs_root: Path, embedded_redis: Any) -> dict[str, Any]:
    return _run(runs_root, embedded_redis, "one-process")


_TWO_RANKS: dict[tuple[Path, str], dict[str, Any]] = {}


def _two_ranks(root: Path, embedded_redis: Any, parallelism: str) -> dict[str, Any]:
    """The two-rank run of ``parallelism`` (once per module and worker: the resume test continues it)."""
    key = (root, parallelism)
    if key not in _TWO_RANKS:
        _TWO_RANKS[key] = _run(
            root, embedded_redis, f"two-{parallelism}", processes=2, parallelism=parallelism
        )
    return _TWO_RANKS[key]


@pytest.mark.parametrize("parallelism", ["ddp", "fsdp2"])
def test_two_ranks_publish_the_critic_one_process_publishes(
    single: dict[str, Any], runs_root: Path, embedded_redis: Any, parallelism: str
) -> None:
    double = _two_ranks(runs_root, embedded_redis, parallelism)
    assert double["info"]["processes"] == 2 and single["info"]["processes"] == 1
    # SIGTERM: rank 0 stopped and ended rank 1's loop; no rank was cut off inside a collective
    # (torchrun itself reports a signal with exit code 1, before its grace period ran out).
    assert double["code"] in (0, 1), double["log"][-4000:]
    assert "rank 1: rank 0 ended training" in double["log"], double["log"][-4000:]
    assert "Traceback" not in double["log"].split("signal 15")[0]
    assert "Connection closed by peer" not in double["log"], double["log"][-4000:]
    for run in (single, double):
        assert run["status"].published_version == 2
        assert run["status"].replay_depth == 0  # each trajectory used twice, then evicted
        assert [v for v in range(3) if run["store"].path("critic", v).exists()] == [0, 1, 2]
    assert double["status"].last_loss == pytest.approx(single["status"].last_loss, rel=1e-4)
    assert double["status"].last_explained_variance == pytest.approx(
        single["status"].last_explained_variance, rel=1e-3, abs=1e-5
    )
    initial, one, two = _critic(single["store"], 0), _critic(single["store"], 2), _critic(double["store"], 2)
    assert one.keys() == two.keys()
    moved = 0.0
    for name, tensor in one.items():
        torch.testing.assert_close(two[name], tensor, rtol=1e-3, atol=1e-5, msg=name)
        moved = max(moved, float((tensor - initial[name]).abs().max()))
    assert moved > 1e-3  # the two updates changed the critic: the comparison is not of untouched weights


def test_a_two_rank_fsdp2_critic_resumes_its_adamw_state_in_one_process(
    runs_root: Path, embedded_redis: Any
) -> None:
    """The checkpoint two FSDP2 ranks wrote (DCP shards) restores weights, AdamW moments and step
    in one process: its next two updates equal an uninterrupted trainer's, and differ from a
    trainer that restarted from the published weights alone (fresh moments)."""
    from lecritique.advantages.targets import critic_targets
    from lecritique.config import parse_spec
    from lecritique.training.critic_trainer import CriticTrainer

    _two_ranks(runs_root, embedded_redis, "fsdp2")
    resumed = _run(runs_root, embedded_redis, "two-fsdp2", seed=4)  # one process, the next 8 trajectories
    assert "resumed the critic's whole training state of update 2" in resumed["log"], resumed["log"][-3000:]
    assert resumed["status"].published_version == 4

    spec = parse_spec(json.loads((runs_root / "two-fsdp2" / "spec.json").read_text()))
    store: WeightStore = resumed["store"]

    def train(trainer: CriticTrainer, seeds: list[int]) -> dict[str, torch.Tensor]:
        for seed in seeds:
            batch = _trajectories(seed)
            trainer.train_step(batch, critic_targets(batch, spec.estimator.critic_target_lambda()))
        return {name: tensor.detach().clone() for name, tensor in trainer.model.state_dict().items()}

    torch.manual_seed(spec.seed)  # the service's fresh head
    uninterrupted = train(CriticTrainer.from_policy(store.path("policy", 0), spec.critic), [3, 3, 4, 4])
    fresh_moments = train(CriticTrainer.load(store.path("critic", 2), spec.critic), [4, 4])
    published = load_file(store.path("critic", 4) / "model.safetensors")
    gap = 0.0
    for name, tensor in published.items():
        torch.testing.assert_close(tensor, uninterrupted[name], rtol=1e-3, atol=1e-5, msg=name)
        gap = max(gap, float((fresh_moments[name] - uninterrupted[name]).abs().max()))
    assert gap > 1e-4  # the moments matter: without them the same two updates land elsewhere
