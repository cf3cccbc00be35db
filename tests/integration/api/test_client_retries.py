"""The client's retries, over real HTTP: a local server that answers 503 with Retry-After, then 200.

The client's ``sleep`` is recorded instead of waited, so the test checks how long it would wait
(Retry-After in seconds or as an HTTP date, else exponential backoff) without timing anything.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lecritique.client import LecritiqueClient, RetryPolicy, Unavailable
from lecritique.client.transport import retry_after_seconds
from tests.integration.api.api_process import free_port

EXPERIMENT = {
    "id": "exp-0123456789",
    "name": "n",
    "tenant": "t",
    "status": "running",
    "launcher": "local",
    "created_at": 1.0,
    "updated_at": 1.0,
}


class FlakyServer:
    """Answers each request with the next queued (status, headers) and records what it received."""

    def __init__(self, answers: list[tuple[int, dict[str, str]]]) -> None:
        self.answers = list(answers)
        self.received: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.received.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": self.rfile.read(length),
                    }
                )
                status, headers = owner.answers.pop(0) if owner.answers else (200, {})
                body = json.dumps(EXPERIMENT if status < 400 else {"detail": "redis unavailable"}).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server_factory() -> Iterator[Any]:
    servers: list[FlakyServer] = []

    def make(answers: list[tuple[int, dict[str, str]]]) -> FlakyServer:
        servers.append(FlakyServer(answers))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after_seconds("7") == 7.0
    now = time.time()
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now=now) == pytest.approx(
        30, abs=1
    )
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_a_503_is_retried_as_long_as_retry_after_says(server_factory: Any) -> None:
    server = server_factory([(503, {"Retry-After": "2"}), (503, {}), (200, {})])
    sleeps: list[float] = []
    with LecritiqueClient(
        server.url, "token", sleep=sleeps.append, retry=RetryPolicy(base_delay=0.5)
    ) as client:
        assert client.get(EXPERIMENT["id"]).id == EXPERIMENT["id"]
    assert sleeps == [2.0, 1.0]  # Retry-After, then the backoff of the second retry (0.5 * 2)
    assert len(server.received) == 3


def test_retries_of_a_submission_carry_one_idempotency_key(server_factory: Any) -> None:
    server = server_factory([(503, {"Retry-After": "1"}), (503, {"Retry-After": "1"}), (201, {})])
    with LecritiqueClient(server.url, "token", sleep=lambda _: None) as client:
        client.submit({"name": "x"})
    keys = {request["headers"]["Idempotency-Key"] for request in server.received}
    assert len(server.received) == 3 and len(keys) == 1
    assert all(json.loads(request["body"]) == {"name": "x"} for request in server.received)
    assert all(request["headers"]["Authorization"] == "Bearer token" for request in server.received)


def test_the_client_gives_up_with_a_clear_message(server_factory: Any) -> None:
    server = server_factory([(503, {"Retry-After": "600"})] * 10)
    sleeps: list[float] = []
    with (
        LecritiqueClient(
            server.url, "token", sleep=sleeps.append, retry=RetryPolicy(attempts=3, max_delay=30)
        ) as client,
        pytest.raises(
            Unavailable, match=r"the API is unavailable \(503\): redis unavailable \(gave up after 3 tries\)"
        ),
    ):
        client.list()
    assert sleeps == [30.0, 30.0] and len(server.received) == 3  # Retry-After capped at max_delay


def test_an_unreachable_api_is_retried_with_backoff() -> None:
    sleeps: list[float] = []
    port = free_port()
    with (
        LecritiqueClient(
            f"http://127.0.0.1:{port}",
            "token",
            sleep=sleeps.append,
            retry=RetryPolicy(attempts=4, base_delay=0.5),
        ) as client,
        pytest.raises(Unavailable, match=f"cannot reach the API at http://127.0.0.1:{port}"),
    ):
        client.get("exp-1")
    assert sleeps == [0.5, 1.0, 2.0]
