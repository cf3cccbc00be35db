"""The REST API as a real process (``lecritique api serve``, uvicorn) for restart and lifecycle tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from lecritique.tenancy.tokens import hash_token
from tests.helm_support import ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_api_settings(
    redis_url: str,
    runs_dir: Path,
    tokens: dict[str, str],
    policies: dict[str, dict[str, object]],
    **extra: str,
) -> dict[str, str]:
    """The environment of an API that runs experiments as local processes: ``tokens`` maps tenant
    to plain token (hashed here), ``policies`` is ``LECRITIQUE_API_TENANT_POLICIES``; ``extra``
    adds ``LECRITIQUE_API_<NAME>`` settings."""
    import json

    return {
        "LECRITIQUE_API_REDIS_URL": redis_url,
        "LECRITIQUE_API_LAUNCHER": "local",
        "LECRITIQUE_API_RUNS_DIR": str(runs_dir),
        "LECRITIQUE_API_TOKENS": json.dumps({tenant: hash_token(token) for tenant, token in tokens.items()}),
        "LECRITIQUE_API_TENANT_POLICIES": json.dumps(policies),
        "LECRITIQUE_API_RECONCILE_SECONDS": "2",
        **{f"LECRITIQUE_API_{name.upper()}": value for name, value in extra.items()},
    }


class ApiProcess:
    """``python -m lecritique api serve`` on a loopback port with the given LECRITIQUE_API_* settings."""

    def __init__(self, settings: dict[str, str], log_path: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.env = dict(os.environ)
        self.env.update(settings)
        paths = [str(ROOT / "libs"), str(ROOT)]
        if self.env.get("PYTHONPATH"):
            paths.append(self.env["PYTHONPATH"])
        self.env["PYTHONPATH"] = os.pathsep.join(paths)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> ApiProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "lecritique",
                    "api",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "info",
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(ROOT),
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the API exited with code {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.2)
        raise TimeoutError(f"the API did not become ready in {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        """Stop the API process only (experiments it launched run in their own sessions)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children of children, across sessions)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current and child not in found]
        found.update(children)
        frontier.extend(children)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
