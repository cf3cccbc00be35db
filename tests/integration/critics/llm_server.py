"""Real local HTTP servers for the OpenAI-compatible client: the rollout service's route, and a
scripted server (ThreadingHTTPServer) whose answers, delays and failures a test chooses."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import yaml

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import ManagedProcess, child_environment, python_command
from lecritique.v1 import common_pb2, rollout_pb2_grpc
from lecritique.weights import WeightStore

LLM_KEY = "sk-test-critic"
LLM_MODEL = "critic-llm"


@dataclass
class RolloutLLM:
    process: ManagedProcess
    base_url: str


@contextmanager
def rollout_llm(model: Path, root: Path) -> Iterator[RolloutLLM]:
    """``lecritique serve rollout`` on ``model`` with its OpenAI-compatible route on a side port."""
    spec = {
        "name": "llm",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(model)},
        "estimator": {"name": "rloo"},
    }
    root.mkdir(parents=True, exist_ok=True)
    spec_path = root / "llm.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    WeightStore(root / "weights").publish("policy", model)
    env = child_environment(REPO_ROOT)
    env.update(
        {
            "LECRITIQUE_ROLLOUT_OPENAI_PORT": "0",
            "LECRITIQUE_ROLLOUT_OPENAI_MODEL": LLM_MODEL,
            "LECRITIQUE_ROLLOUT_OPENAI_API_KEY": LLM_KEY,
        }
    )
    process = ManagedProcess(
        name="llm",
        command=python_command(
            "lecritique",
            "serve",
            "rollout",
            "--spec",
            str(spec_path),
            "--weights-dir",
            str(root / "weights"),
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--host",
            "127.0.0.1",
            "--port-file",
            str(root / "llm.json"),
        ),
        log_path=root / "llm.log",
        port_file=root / "llm.json",
        env=env,
    )
    process.start()
    try:
        process.wait_ready(120)
        with grpc.insecure_channel(process.address) as channel:
            info = rollout_pb2_grpc.RolloutStub(channel).Info(common_pb2.ServiceInfoRequest(), timeout=10)
        port = json.loads(info.details_json)["openai_port"]
        yield RolloutLLM(process, f"http://127.0.0.1:{port}/v1")
    finally:
        process.stop()


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    """JSON body (None: a valid completion)."""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class ScriptedLLM:
    """Answers requests with the scripted replies in order, then with ``default``."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.default = Reply()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner._lock:
                    owner.requests.append(
                        {"path": self.path, "body": body, "authorization": self.headers.get("Authorization")}
                    )
                    reply = owner.script.pop(0) if owner.script else owner.default
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                try:
                    time.sleep(reply.delay)
                    # Out of flight before the answer leaves: the client may send its next request the
                    # moment it reads this one, and counting that overlap would be this server's lag.
                    with owner._lock:
                        owner.in_flight -= 1
                    payload = reply.body if reply.body is not None else completion(body)
                    data = json.dumps(payload).encode()
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def completion(request: dict[str, Any]) -> dict[str, Any]:
    """A valid chat completion whose text echoes the last message's length; 10 + 3 tokens."""
    content = request["messages"][-1]["content"]
    return {
        "id": "x",
        "object": "chat.completion",
        "model": request["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"0: 0.25\nlen {len(content)}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }
