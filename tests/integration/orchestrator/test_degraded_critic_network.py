"""The evaluation stage against a real gRPC evaluator that is down or hung: the batch degrades
(the critic-free fallback and the rest of the stage are tested in
tests/unit/orchestrator/test_degraded_critic.py)."""

from __future__ import annotations

import socket
import threading
from concurrent import futures

import grpc

from lecritique.orchestrator.clients import ValueEvaluatorClient, value_evaluator_stub
from lecritique.rpc.replica_pool import ReplicaPool
from lecritique.v1 import value_pb2, value_pb2_grpc
from tests.unit.orchestrator.test_degraded_critic import _episodes, _plain_queries, _stage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_evaluator_degrades_the_batch(monkeypatch):
    pool = ReplicaPool(
        "value-evaluator", [f"127.0.0.1:{_free_port()}"], value_evaluator_stub, deadline_seconds=2.0
    )
    stage = _stage(ValueEvaluatorClient(pool))
    _plain_queries(monkeypatch)
    scored = stage.score(_episodes())
    assert scored.degraded == "evaluator UNAVAILABLE" and scored.value_version == -1
    assert all(t.values is None for t in scored.trajectories)


class _HungEvaluator(value_pb2_grpc.ValueEvaluatorServicer):
    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def Evaluate(self, request, context):
        self.release.wait(30)
        return value_pb2.EvaluateResponse()


def test_a_hung_evaluator_is_treated_as_down_after_the_deadline(monkeypatch):
    release = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    value_pb2_grpc.add_ValueEvaluatorServicer_to_server(_HungEvaluator(release), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        pool = ReplicaPool(
            "value-evaluator", [f"127.0.0.1:{port}"], value_evaluator_stub, deadline_seconds=0.5
        )
        stage = _stage(ValueEvaluatorClient(pool))
        _plain_queries(monkeypatch)
        assert stage.score(_episodes()).degraded == "evaluator DEADLINE_EXCEEDED"
    finally:
        release.set()
        server.stop(0)
