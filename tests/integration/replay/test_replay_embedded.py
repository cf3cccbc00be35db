"""The embedded redis-server lives exactly as long as the process that started it (Linux: /proc,
parent-death signal)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time
from lecritique.redis_connection import connect_redis
client = connect_redis()
info = client.info("server")
print(info["process_id"], info["tcp_port"], flush=True)
if sys.argv[1] == "wait":
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (this container's init may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout_s: float = 120.0) -> bool:
    """True once ``pid`` has exited (redis-server notices its parent's end on its own schedule)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_embedded_server_stops_when_its_process_exits(subprocess_env):
    subprocess_env.pop("REDIS_URL", None)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, "exit"], env=subprocess_env, capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    pid = int(child.stdout.split()[0])
    assert _wait_gone(pid), f"redis-server {pid} outlived its process"


def test_embedded_server_stops_when_its_process_is_killed(subprocess_env):
    subprocess_env.pop("REDIS_URL", None)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "wait"], env=subprocess_env, stdout=subprocess.PIPE, text=True
    )
    try:
        pid = int(child.stdout.readline().split()[0])
        assert _alive(pid)
        child.send_signal(signal.SIGKILL)  # no atexit handlers run
        child.wait(timeout=10)
        assert _wait_gone(pid), f"redis-server {pid} outlived a SIGKILLed parent"
    finally:
        child.kill()
        child.wait()
