"""An experiment whose trainers broadcast weights to the rollout and evaluator replicas (gloo)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from lecritique.v1 import common_pb2, rollout_pb2_grpc, value_pb2_grpc
from lecritique.weights import WeightStore
from lecritique.weights.broadcast import read_endpoint
from tests.integration.services.conftest import pipeline_spec, read_metrics, running_services

pytestmark = pytest.mark.slow

BROADCAST = {"kind": "broadcast", "port": 0, "persist_every": 100, "join_timeout_seconds": 120}


def _info(address: str, stub: type) -> common_pb2.ServiceInfo:
    with grpc.insecure_channel(address) as channel:
        info: common_pb2.ServiceInfo = stub(channel).Info(common_pb2.ServiceInfoRequest(), timeout=30)
    return info


def test_policy_and_critic_versions_reach_every_replica_by_broadcast(
    tiny_policy: Path, tmp_path: Path
) -> None:
    spec = pipeline_spec(
        tiny_policy,
        rollout={"replicas": 2},
        critic={
            "context": "none",
            "warmup_updates": 2,
            "optimizer": {"lr": 1e-3},
            "weight_transport": BROADCAST,
        },
        policy_trainer={"optimizer": {"lr": 1e-4}, "weight_transport": BROADCAST},
        orchestrator={"steps": 3},
    )
    with running_services(spec, tmp_path) as launcher:
        launcher.start_orchestrator()
        code = launcher.wait()
        assert code == 0, (tmp_path / "logs" / "orchestrator.log").read_text()[-4000:]
        addresses = launcher.addresses()
        # Read before the services stop: a broadcast the stopping evaluator misses is (rightly)
        # written to the store, so the store read after the stop may hold a later version.
        store = WeightStore(tmp_path / "weights")
        critic_stored = store.versions("critic")
        rollout_versions = [
            _info(a, rollout_pb2_grpc.RolloutStub).weights_version for a in addresses["rollout"]
        ]
        evaluator = _info(addresses["value-evaluator"][0], value_pb2_grpc.ValueEvaluatorStub)
    rows = read_metrics(tmp_path)
    assert [row["policy_version"] for row in rows] == [1, 2, 3]
    # Both replicas serve the newest policy, though only version 0 (the base) and version 1 (the
    # first publish of the broadcast, persisted) were ever written to the store.
    assert rollout_versions == [3, 3]
    assert store.versions("policy") == [0, 1]
    policy_endpoint = read_endpoint(store.role_dir("policy"))
    assert policy_endpoint is not None and policy_endpoint.receivers == 2 and policy_endpoint.generation == 1
    # The critic went the same way to its evaluator: it serves a version the store never held.
    trainer_log = (tmp_path / "logs" / "value-trainer.log").read_text()
    assert "critic weights broadcast to 1 replicas" in trainer_log
    assert evaluator.weights_version > max(critic_stored)
    details = json.loads(evaluator.details_json)
    assert details["critic_kind"] == "discriminative"
    for name in ("rollout-0", "rollout-1", "value-evaluator-0"):
        assert "joined broadcast generation 1" in (tmp_path / "logs" / f"{name}.log").read_text(), name
