"""ReplicaPool against real gRPC servers on loopback sockets."""

import socket

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lecritique.envs import parse_environment_config
from lecritique.envs.scoring_pool import ScoringLimits
from lecritique.rpc.replica_pool import NoReplicaAvailable, ReplicaPool, resolve
from lecritique.rpc.server import StartedService, start_server
from lecritique.v1 import common_pb2, environment_pb2, environment_pb2_grpc
from services.environment_verifier.server import servicer_for


def _start(experiment: str):
    servicer, pool = servicer_for(
        parse_environment_config({"kind": "arithmetic"}), experiment, ScoringLimits(workers=1)
    )
    running = start_server(
        service="environment-verifier",
        add_servicers=lambda server: environment_pb2_grpc.add_EnvironmentVerifierServicer_to_server(
            servicer, server
        ),
        service_names=[environment_pb2.DESCRIPTOR.services_by_name["EnvironmentVerifier"].full_name],
        port=0,
        host="127.0.0.1",
    )
    return StartedService(running, on_stop=pool.close)


def _dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def servers():
    running = [_start("a"), _start("b")]
    yield running
    for server in running:
        server.stop(grace=0)


def test_round_robin_reaches_every_replica(servers):
    pool = ReplicaPool(
        "env", [f"127.0.0.1:{s.port}" for s in servers], environment_pb2_grpc.EnvironmentVerifierStub
    )
    seen = {pool.call("Info", common_pb2.ServiceInfoRequest()).experiment for _ in range(6)}
    assert seen == {"a", "b"}
    pool.close()


def test_a_dead_replica_is_skipped(servers):
    dead = _dead_address()
    pool = ReplicaPool(
        "env",
        [dead, f"127.0.0.1:{servers[0].port}"],
        environment_pb2_grpc.EnvironmentVerifierStub,
        deadline_seconds=5,
    )
    answers = [pool.call("Info", common_pb2.ServiceInfoRequest()).experiment for _ in range(5)]
    assert answers == ["a"] * 5
    results = pool.call_each("Info", common_pb2.ServiceInfoRequest())
    assert isinstance(results[dead], Exception) and results[f"127.0.0.1:{servers[0].port}"].experiment == "a"
    pool.close()


def test_no_replica_available_is_a_clear_error():
    pool = ReplicaPool(
        "env", [_dead_address()], environment_pb2_grpc.EnvironmentVerifierStub, deadline_seconds=2
    )
    with pytest.raises(NoReplicaAvailable, match="no env replica answered Info"):
        pool.call("Info", common_pb2.ServiceInfoRequest())


def test_health_and_reflection_are_served(servers):
    import grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{servers[0].port}") as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
        )
        names = {s.name for r in responses for s in r.list_services_response.service}
    assert "lecritique.v1.EnvironmentVerifier" in names and "grpc.health.v1.Health" in names


def test_resolve_keeps_port_and_rejects_garbage():
    assert resolve("localhost:1234")[0].endswith(":1234")
    with pytest.raises(ValueError, match="host:port"):
        resolve("localhost")


def test_invalid_split_is_invalid_argument(servers):
    import grpc

    pool = ReplicaPool("env", [f"127.0.0.1:{servers[0].port}"], environment_pb2_grpc.EnvironmentVerifierStub)
    with pytest.raises(grpc.RpcError) as error:
        pool.call("SampleTasks", environment_pb2.SampleTasksRequest(n=1, split="validation"))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "split" in error.value.details()
