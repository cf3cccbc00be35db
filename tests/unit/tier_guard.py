"""The unit tier's guard: no processes, sockets, servers or tiny-model builds, so it runs in minutes.

While a unit test runs (``tests/unit/conftest.py``: its fixtures' set-up and tear-down included,
so a session fixture it pulls in counts too), each way out of the process raises :class:`UnitTierViolation`:
starting a process (``subprocess``, ``os.fork``/``posix_spawn``/``system``, ``multiprocessing``),
opening a connection or a listening socket (``socket.connect``/``bind``, which every HTTP, Redis
and Prometheus client and server goes through), a gRPC server or channel (gRPC's sockets are
its C core's, not Python's), and building a trained tiny model (``lecritique.tinybuild``). A test
that needs one of them belongs in ``tests/integration``. ``tests/unit/architecture/test_tiers.py``
checks the guard and the imports of this folder.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import grpc.aio
import pytest

import lecritique.tinybuild
import lecritique.tinybuild.build


class UnitTierViolation(BaseException):
    """Raised where a unit test leaves the process. A ``BaseException``: code under test that
    catches ``Exception`` (a retry loop, a fallback) cannot hide it."""


def _guarded(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnitTierViolation(f"a unit test {what}: move it to tests/integration")

    return refuse


GUARDS: list[tuple[object, str, str]] = [
    (subprocess.Popen, "_execute_child", "started a process (subprocess)"),
    (os, "fork", "forked (os.fork)"),
    (os, "forkpty", "forked (os.forkpty)"),
    (os, "posix_spawn", "started a process (os.posix_spawn)"),
    (os, "posix_spawnp", "started a process (os.posix_spawnp)"),
    (os, "system", "started a process (os.system)"),
    (multiprocessing.process.BaseProcess, "start", "started a process (multiprocessing)"),
    (socket.socket, "connect", "opened a connection (socket.connect)"),
    (socket.socket, "connect_ex", "opened a connection (socket.connect_ex)"),
    (socket.socket, "bind", "bound a socket (a server)"),
    (grpc, "server", "started a gRPC server"),
    (grpc, "insecure_channel", "opened a gRPC channel"),
    (grpc, "secure_channel", "opened a gRPC channel"),
    (grpc.aio, "server", "started a gRPC server"),
    (grpc.aio, "insecure_channel", "opened a gRPC channel"),
    (grpc.aio, "secure_channel", "opened a gRPC channel"),
    (lecritique.tinybuild.build, "build_tiny_model", "built a tiny model (lecritique.tinybuild)"),
    (lecritique.tinybuild, "build_tiny_model", "built a tiny model (lecritique.tinybuild)"),
]
"""(owner, attribute, what a unit test did by calling it)."""


@contextmanager
def guard() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for owner, name, what in GUARDS:
            if hasattr(owner, name):
                patch.setattr(owner, name, _guarded(what))
        yield
