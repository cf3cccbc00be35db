"""A recording HTTP endpoint that answers the kubernetes launcher's REST calls in the Kubernetes wire format.

No kube-apiserver can run on the dev/CI machines; this stands in for one at the HTTP level only
(create, read a Job, list by label selector, delete by name with a uid precondition), so tests
exercise the real ``kubernetes`` client.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml


def _failure(reason: str, code: int) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}


def _selector(query: dict[str, list[str]]) -> dict[str, str]:
    selector = query.get("labelSelector", [""])[0]
    return dict(part.split("=", 1) for part in selector.split(",") if part)


class RecordingApiServer:
    """Answers Kubernetes REST calls from memory and records them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.objects: dict[str, dict[str, Any]] = {}
        self.job_conditions: list[dict[str, str]] = []
        self.job_active = 1
        self.job_status_by_name: dict[str, dict[str, Any]] = {}
        self.pod_logs: dict[str, str] = {}
        """Pod name -> its log, answered as text to ``GET .../pods/<name>/log``."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(
                self, code: int, body: dict[str, Any] | str
            ) -> None:  # also replaced by tests (a quota error)
                text = isinstance(body, str)
                data = body.encode() if text else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                query = parse_qs(url.query)
                server.calls.append((self.command, url.path, query, body))
                self._reply(*server.answer(self.command, url.path, query, body))

            do_POST = do_GET = do_DELETE = _handle

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, dict[str, Any] | str]:
        """(status code, body) the API server would answer."""
        if method == "GET" and path.endswith("/log"):
            pod = path.rsplit("/", 2)[-2]
            if pod not in self.pod_logs:
                return 404, _failure("NotFound", 404)
            lines = self.pod_logs[pod].splitlines(keepends=True)
            return 200, "".join(
                lines[-int(query.get("tailLines", ["0"])[0]) :] if "tailLines" in query else lines
            )
        if method == "POST":
            key = f"{path}/{body['metadata']['name']}"
            if key in self.objects:
                return 409, _failure("AlreadyExists", 409)
            body["metadata"]["uid"] = str(uuid.uuid4())
            self.objects[key] = body
            return 201, body
        if method == "GET" and path not in self.objects and not path.split("/")[-1].startswith("exp-"):
            wanted = _selector(query)
            items = [
                o
                for k, o in self.objects.items()
                if k.rsplit("/", 1)[0] == path and wanted.items() <= o["metadata"].get("labels", {}).items()
            ]
            return 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}
        found = self.objects.get(path)
        if found is None:
            return 404, _failure("NotFound", 404)
        if method == "GET":
            default = {"active": self.job_active, "conditions": self.job_conditions}
            return 200, {**found, "status": self.job_status_by_name.get(path.rsplit("/", 1)[-1], default)}
        precondition = ((body or {}).get("preconditions") or {}).get("uid")
        if precondition is not None and precondition != found["metadata"]["uid"]:
            return 409, _failure("Conflict", 409)
        del self.objects[path]
        # The API server answers a Service's deletion with the Service, others with a Status.
        return 200, found if found["kind"] == "Service" else {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Success",
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        """A kubeconfig whose current context talks to this endpoint (for API processes)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "recorder", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "not-checked"}}],
            "contexts": [
                {
                    "name": "recorder",
                    "context": {"cluster": "recorder", "user": "tester", "namespace": namespace},
                }
            ],
            "current-context": "recorder",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def finish_job(self, job_name: str, condition: str, reason: str = "", message: str = "") -> None:
        """Make one Job report a Complete or Failed condition."""
        self.job_status_by_name[job_name] = {
            "active": 0,
            "conditions": [{"type": condition, "status": "True", "reason": reason, "message": message}],
        }

    def count(self, method: str) -> int:
        return sum(1 for call in self.calls if call[0] == method)
