"""A client for a service that may run as several replicas.

``ReplicaPool`` resolves every target (``host:port``; a Kubernetes headless Service name
resolves to one address per pod) to all its addresses, spreads calls round-robin across them,
skips a replica that refuses connections (cooling it down for a while), re-resolves names
periodically so new pods join, and puts a deadline on every call.

A replica that does not answer within the deadline (hung: SIGSTOP, a stuck collective) is treated
like one that refuses connections: it is down, the call goes to another replica. With
``retry_seconds`` a call whose every replica is down keeps trying, with backoff, for that long:
long enough for a supervisor to restart the service. Every RPC of this project is idempotent
(``Train`` per step, the environment is stateless, ``Generate`` and ``LoadWeights`` may repeat),
so a retry after a deadline is safe.
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc

from lecritique.rpc.server import DEFAULT_MAX_MESSAGE_BYTES, channel_options

logger = logging.getLogger(__name__)

StubT = TypeVar("StubT")

# Codes that mean the replica is down (refused, or hung past the deadline): try another.
_RETRY_ON_OTHER_REPLICA = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

# Reconnect quickly to a restarted replica (gRPC's default backoff grows to 120 s).
_RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class NoReplicaAvailable(RuntimeError):
    """Every replica of a service was down (refused the call or hung past the deadline)."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        super().__init__(message)
        self.code = code
        """The status of the last attempt (UNAVAILABLE or DEADLINE_EXCEEDED)."""


def resolve(target: str) -> list[str]:
    """All ``ip:port`` addresses of ``host:port`` (the target itself if it does not resolve)."""
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"service address {target!r} must be host:port")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror:
        return [target]
    addresses = []
    for family, _, _, _, sockaddr in infos:
        ip, bound_port = str(sockaddr[0]), int(sockaddr[1])
        address = f"[{ip}]:{bound_port}" if family == socket.AF_INET6 else f"{ip}:{bound_port}"
        if address not in addresses:
            addresses.append(address)
    return addresses or [target]


@dataclass
class _Replica(Generic[StubT]):
    address: str
    channel: grpc.Channel
    stub: StubT
    dead_until: float = 0.0


class ReplicaPool(Generic[StubT]):
    """Round-robin client over every replica of one gRPC service."""

    def __init__(
        self,
        service: str,
        targets: Sequence[str],
        stub_factory: Callable[[grpc.Channel], StubT],
        *,
        deadline_seconds: float = 60.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        cooldown_seconds: float = 5.0,
        resolve_every_seconds: float = 30.0,
        retry_seconds: float = 0.0,
    ) -> None:
        if not targets:
            raise ValueError(f"{service}: at least one address is required")
        self.service = service
        self.targets = list(targets)
        self.stub_factory = stub_factory
        self.deadline_seconds = deadline_seconds
        self.max_message_bytes = max_message_bytes
        self.cooldown_seconds = cooldown_seconds
        self.resolve_every_seconds = resolve_every_seconds
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._replicas: dict[str, _Replica[StubT]] = {}
        self._counter = itertools.count()
        self._resolved_at = 0.0
        self._refresh()

    def _refresh(self) -> None:
        addresses = [address for target in self.targets for address in resolve(target)]
        with self._lock:
            for address in addresses:
                if address not in self._replicas:
                    channel = grpc.insecure_channel(
                        address, options=channel_options(self.max_message_bytes) + _RECONNECT_OPTIONS
                    )
                    self._replicas[address] = _Replica(address, channel, self.stub_factory(channel))
            for address in list(self._replicas):
                if address not in addresses:
                    self._replicas.pop(address).channel.close()
            self._resolved_at = time.monotonic()

    @property
    def addresses(self) -> list[str]:
        with self._lock:
            return list(self._replicas)

    def _ordered(self) -> list[_Replica[StubT]]:
        if time.monotonic() - self._resolved_at > self.resolve_every_seconds:
            self._refresh()
        with self._lock:
            replicas = list(self._replicas.values())
        start = next(self._counter) % len(replicas)
        rotated = replicas[start:] + replicas[:start]
        now = time.monotonic()
        alive = [r for r in rotated if r.dead_until <= now]
        # When every replica is cooling down, try them anyway rather than fail without trying.
        return alive + [r for r in rotated if r.dead_until > now]

    def call(self, method: str, request: Any, *, timeout: float | None = None) -> Any:
        """Call ``method`` on the next replica; a replica that is down passes the call to the others,
        and while all are down the call is retried with backoff for ``retry_seconds``."""
        give_up = time.monotonic() + self.retry_seconds
        pause = 0.2
        while True:
            try:
                return self._call_once(method, request, timeout)
            except NoReplicaAvailable:
                if time.monotonic() + pause > give_up:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

    def _call_once(self, method: str, request: Any, timeout: float | None) -> Any:
        errors = []
        code = grpc.StatusCode.UNAVAILABLE
        for replica in self._ordered():
            try:
                return getattr(replica.stub, method)(request, timeout=timeout or self.deadline_seconds)
            except grpc.RpcError as error:
                if error.code() not in _RETRY_ON_OTHER_REPLICA:
                    raise
                code = error.code()
                replica.dead_until = time.monotonic() + self.cooldown_seconds
                logger.warning(
                    "%s replica %s down (%s); trying another", self.service, replica.address, code.name
                )
                errors.append(f"{replica.address}: {code.name} {error.details()}")
        raise NoReplicaAvailable(f"no {self.service} replica answered {method}: {'; '.join(errors)}", code)

    def call_each(self, method: str, request: Any, *, timeout: float | None = None) -> dict[str, Any]:
        """Call ``method`` on every replica (e.g. LoadWeights); unreachable ones are reported as errors."""
        results: dict[str, Any] = {}
        for replica in self._ordered():
            try:
                results[replica.address] = getattr(replica.stub, method)(
                    request, timeout=timeout or self.deadline_seconds
                )
            except grpc.RpcError as error:
                if error.code() not in _RETRY_ON_OTHER_REPLICA:
                    raise
                replica.dead_until = time.monotonic() + self.cooldown_seconds
                results[replica.address] = error
        return results

    def wait_ready(self, timeout: float) -> None:
        """Block until every resolved replica's channel is connected (service start-up)."""
        deadline = time.monotonic() + timeout
        for replica in self._ordered():
            remaining = max(0.1, deadline - time.monotonic())
            try:
                grpc.channel_ready_future(replica.channel).result(timeout=remaining)
            except grpc.FutureTimeoutError:
                raise TimeoutError(
                    f"{self.service} replica {replica.address} not ready after {timeout:.0f} s"
                ) from None

    def close(self) -> None:
        with self._lock:
            for replica in self._replicas.values():
                replica.channel.close()
            self._replicas.clear()
