"""A hung replica is down, not waited on; a replica that comes back is used again (real processes)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lecritique.envs import parse_environment_config
from lecritique.envs.scoring_pool import ScoringLimits
from lecritique.rpc.replica_pool import NoReplicaAvailable, ReplicaPool
from lecritique.rpc.server import StartedService, start_server
from lecritique.v1 import common_pb2, environment_pb2, environment_pb2_grpc
from services.environment_verifier.server import servicer_for

_SERVE = """
import sys, threading
from tests.integration.rpc.test_down_replicas import start
server = start("hung", int(sys.argv[1]))
print(server.port, flush=True)
threading.Event().wait()
"""


def start(experiment: str, port: int = 0):
    servicer, pool = servicer_for(
        parse_environment_config({"kind": "arithmetic"}), experiment, ScoringLimits(workers=1)
    )
    running = start_server(
        service="environment-verifier",
        add_servicers=lambda server: environment_pb2_grpc.add_EnvironmentVerifierServicer_to_server(
            servicer, server
        ),
        service_names=[environment_pb2.DESCRIPTOR.services_by_name["EnvironmentVerifier"].full_name],
        port=port,
        host="127.0.0.1",
    )
    return StartedService(running, on_stop=pool.close)


@pytest.fixture
def hung_replica():
    """A replica in its own process, answering once, then stopped with SIGSTOP (a hung pod)."""
    process = subprocess.Popen([sys.executable, "-c", _SERVE, "0"], stdout=subprocess.PIPE, env=os.environ)
    assert process.stdout is not None
    port = int(process.stdout.readline())
    yield process, f"127.0.0.1:{port}"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def _stop(pid: int) -> None:
    """SIGSTOP, returning once every thread of the process is stopped: kill() only queues the
    signal, and the replica once answered a call after it on a loaded CI machine."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 60  # a hang guard: a loaded machine delays the stop, never a test
    while time.monotonic() < deadline:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):  # a thread may exit meanwhile
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        if states and all(state == "T" for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop within 60 s")


def test_a_hung_replica_is_treated_as_down_and_the_others_serve(hung_replica):
    process, hung = hung_replica
    live = start("live")
    pool = ReplicaPool(
        "env",
        [hung, f"127.0.0.1:{live.port}"],
        environment_pb2_grpc.EnvironmentVerifierStub,
        deadline_seconds=1.0,
    )
    try:
        assert {pool.call("Info", common_pb2.ServiceInfoRequest()).experiment for _ in range(4)} == {
            "hung",
            "live",
        }
        _stop(process.pid)
        answers = [pool.call("Info", common_pb2.ServiceInfoRequest()).experiment for _ in range(6)]
        assert answers == ["live"] * 6
    finally:
        pool.close()
        live.stop(grace=0)


def test_a_call_waits_for_a_restarted_replica_within_retry_seconds():
    placeholder = start("placeholder")
    port = placeholder.port
    placeholder.stop(grace=0)  # the address of a service that is down, being restarted
    restarted: list = []
    threading.Timer(1.5, lambda: restarted.append(start("restarted", port))).start()
    pool = ReplicaPool(
        "env",
        [f"127.0.0.1:{port}"],
        environment_pb2_grpc.EnvironmentVerifierStub,
        deadline_seconds=2,
        retry_seconds=30,
    )
    try:
        assert pool.call("Info", common_pb2.ServiceInfoRequest()).experiment == "restarted"
    finally:
        pool.close()
        time.sleep(0.1)
        for server in restarted:
            server.stop(grace=0)


def test_without_retry_seconds_a_down_service_fails_fast_with_its_status():
    placeholder = start("placeholder")
    port = placeholder.port
    placeholder.stop(grace=0)
    pool = ReplicaPool(
        "env", [f"127.0.0.1:{port}"], environment_pb2_grpc.EnvironmentVerifierStub, deadline_seconds=2
    )
    with pytest.raises(NoReplicaAvailable) as raised:
        pool.call("Info", common_pb2.ServiceInfoRequest())
    assert raised.value.code.name == "UNAVAILABLE"
    pool.close()
