"""What the client commands say to a person: a piped login, a refused token, a stopped API.

Each runs ``python -m lecritique`` as a user would, against a small real HTTP server that knows one
token (the API's own auth is tested in tests/api; here only the client's words matter).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lecritique.client import LecritiqueClient, RetryPolicy, Unavailable
from tests.helm_support import ROOT

GOOD = "good-token"
EXPERIMENT = {
    "id": "exp-0123456789",
    "name": "sudoku-mini-pvf",
    "tenant": "t",
    "status": "running",
    "launcher": "local",
    "created_at": 1.0,
    "updated_at": 1.0,
    "step": 7,
}


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    """``GET /v1/experiments``: 200 and no experiments for the good token, the API's 401 otherwise."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") == f"Bearer {GOOD}":
                status, body = 200, {"experiments": [EXPERIMENT]}
            else:
                status, body = (
                    401,
                    {
                        "detail": [
                            {"field": "Authorization", "message": "unknown token", "type": "unauthorized"}
                        ]
                    },
                )
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def environment(api_url: str, config: Path, token: str | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LECRITIQUE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "libs"), str(ROOT)])
    env["LECRITIQUE_API_URL"] = api_url
    env["LECRITIQUE_CLIENT_CONFIG"] = str(config)
    if token is not None:
        env["LECRITIQUE_API_TOKEN"] = token
    return env


def lecritique(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lecritique", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_piped_login_reads_stdin_without_a_getpass_warning(api_url: str, tmp_path: Path) -> None:
    config = tmp_path / "client.json"
    done = lecritique(environment(api_url, config), "login", stdin=f"{GOOD}\n")
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "echo" not in done.stderr, done.stderr
    assert json.loads(config.read_text())["token"] == GOOD


def test_a_refused_token_names_where_it_came_from(api_url: str, tmp_path: Path) -> None:
    config = tmp_path / "client.json"
    from_env = lecritique(environment(api_url, config, token="stale"), "experiments", "list")
    assert from_env.returncode == 3
    assert (
        "the token in LECRITIQUE_API_TOKEN is wrong: fix or unset LECRITIQUE_API_TOKEN" in from_env.stderr
    ), from_env.stderr

    config.write_text(json.dumps({"api_url": api_url, "token": "stale"}))
    from_file = lecritique(environment(api_url, config), "experiments", "list")
    assert from_file.returncode == 3
    assert f"saved in {config} is wrong: run `lecritique login` again" in from_file.stderr, from_file.stderr
    assert "set LECRITIQUE_API_TOKEN" not in from_file.stderr

    typed = lecritique(
        environment(api_url, tmp_path / "other.json"), "login", "--token-stdin", stdin="stale\n"
    )
    assert typed.returncode == 3 and "refused this token; nothing was saved" in typed.stderr, typed.stderr
    assert "LECRITIQUE_API_TOKEN" not in typed.stderr and not (tmp_path / "other.json").exists()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_client_reports_each_retry_before_waiting() -> None:
    seen: list[tuple[str, int, int, float]] = []
    waits: list[float] = []
    url = f"http://127.0.0.1:{closed_port()}"
    with (
        LecritiqueClient(
            url,
            "t",
            retry=RetryPolicy(attempts=3, base_delay=0.5),
            sleep=waits.append,
            on_retry=lambda *args: seen.append(args),
        ) as client,
        pytest.raises(Unavailable),
    ):
        client.list()
    assert [(failed, tries, wait) for _, failed, tries, wait in seen] == [
        (1, 3, 0.5),
        (2, 3, 1.0),
    ] and waits == [0.5, 1.0]
    assert all(f"cannot reach the API at {url}" in problem for problem, *_ in seen)


def test_a_stopped_api_shows_the_first_retry_at_once(tmp_path: Path) -> None:
    """Not 16.5 s of silence then a count: the first failed try reaches stderr before the wait.

    Ordered, not timed: the first line must arrive while the command still runs, and after it the
    command waits 0.5 + 1 + 2 + 4 + 8 s between its tries; a stderr held back until exit would come
    with the end of the stream. (How soon after start-up is the machine's business: a loaded one
    took over 12 s to import.)"""
    env = environment(f"http://127.0.0.1:{closed_port()}", tmp_path / "client.json", token="t")
    process = subprocess.Popen(
        [sys.executable, "-m", "lecritique", "experiments", "list"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "cannot reach the API" in line and "try 1/6 failed, retrying in 0.5 s" in line, line
        assert process.poll() is None, "the first retry was printed only when the command ended"
    finally:
        process.kill()
        process.wait()


def test_experiments_list_prints_a_header(api_url: str, tmp_path: Path) -> None:
    listed = lecritique(environment(api_url, tmp_path / "client.json", token=GOOD), "experiments", "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "STEP", "SUBMITTED", "NAME"]
    assert row.startswith("exp-0123456789  running") and row.endswith("sudoku-mini-pvf")
    assert header.index("STEP") + len("STEP") == row.index(" 7 ") + 2  # right-aligned under its header
