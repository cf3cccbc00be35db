"""Scaffolding every gRPC service shares.

Each server gets ``grpc.health.v1`` health (SERVING once started, NOT_SERVING while draining),
reflection, explicit message-size limits, per-RPC Prometheus metrics through an interceptor,
a ``/metrics`` HTTP side port, and a graceful stop on SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import Counter, Histogram, start_http_server

logger = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024

RPC_REQUESTS = Counter(
    "lecritique_rpc_requests_total", "gRPC requests handled", ["experiment", "service", "method", "code"]
)
RPC_LATENCY = Histogram(
    "lecritique_rpc_latency_seconds",
    "gRPC handler latency",
    ["experiment", "service", "method"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


def channel_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


class _MetricsInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, service: str, experiment: str) -> None:
        self.service = service
        self.experiment = experiment

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary

        def wrapped(request: Any, context: grpc.ServicerContext) -> Any:
            start = time.perf_counter()
            code = "OK"
            try:
                return inner(request, context)
            except Exception:
                code = "UNKNOWN"
                raise
            finally:
                if context.code() is not None and context.code() != grpc.StatusCode.OK:
                    code = context.code().name
                RPC_REQUESTS.labels(self.experiment, self.service, method, code).inc()
                RPC_LATENCY.labels(self.experiment, self.service, method).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


@dataclass
class RunningServer:
    server: grpc.Server
    health: health.HealthServicer
    port: int
    metrics_port: int | None
    service_names: tuple[str, ...]

    def stop(self, grace: float = 5.0) -> None:
        for name in (*self.service_names, ""):
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.server.stop(grace).wait()

    def wait(self) -> None:
        self.server.wait_for_termination()


def start_server(
    *,
    service: str,
    add_servicers: Callable[[grpc.Server], None],
    service_names: Iterable[str],
    port: int,
    host: str = "0.0.0.0",
    metrics_port: int | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_workers: int = 8,
    port_file: Path | None = None,
    experiment: str = "",
) -> RunningServer:
    """Start a gRPC server with health, reflection, metrics; returns once it is SERVING."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=service),
        interceptors=[_MetricsInterceptor(service, experiment)],
        options=channel_options(max_message_bytes),
    )
    add_servicers(server)
    names = tuple(service_names)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((*names, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"{service}: could not bind gRPC port {host}:{port}")
    server.start()
    bound_metrics_port = None
    if metrics_port is not None:
        metrics_server, _ = start_http_server(metrics_port)
        bound_metrics_port = int(metrics_server.server_port)
    for name in (*names, ""):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    logger.info("%s serving gRPC on %s:%d (metrics on %s)", service, host, bound, bound_metrics_port)
    running = RunningServer(server, health_servicer, bound, bound_metrics_port, names)
    if port_file is not None:
        write_port_file(port_file, running.port, running.metrics_port)
    return running


def start_rank_health(service: str, port: int, host: str) -> RunningServer | None:
    """gRPC health alone, on the first local rank of a trainer pod that does not hold global rank 0
    (its probes need an answer; the other ranks of the pod need none). None on other ranks."""
    if int(os.environ.get("LOCAL_RANK", "0")) != 0:
        return None
    return start_server(
        service=f"{service}-worker", add_servicers=lambda server: None, service_names=[], port=port, host=host
    )


def write_port_file(path: Path, grpc_port: int | None, metrics_port: int | None) -> None:
    """Announce the bound ports (processes may bind port 0) atomically for the launcher."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps({"grpc": grpc_port, "metrics": metrics_port, "pid": os.getpid()}))
    temporary.replace(path)


@dataclass
class StartedService:
    """A service serving gRPC, started by its ``start(runtime)``: its ``serve`` blocks on it until
    a signal (:func:`run_until_signal`); an in-process caller (the examples' tests) stops it."""

    running: RunningServer
    on_stop: Callable[[], None] | None = None
    """Run after the server stopped: ends the service's threads."""

    @property
    def port(self) -> int:
        return self.running.port

    def stop(self, grace: float = 5.0) -> None:
        self.running.stop(grace)
        if self.on_stop is not None:
            self.on_stop()

    def serve_until_signal(self) -> None:
        run_until_signal(self.running, self.on_stop)


def run_until_signal(running: RunningServer, on_stop: Callable[[], None] | None = None) -> None:
    """Block until SIGTERM/SIGINT, then drain (health NOT_SERVING) and stop."""
    stopped = threading.Event()

    def handle(signum: int, _frame: Any) -> None:
        logger.info("signal %d: stopping", signum)
        stopped.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    stopped.wait()
    running.stop()
    if on_stop is not None:
        on_stop()
