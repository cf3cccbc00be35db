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
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                server.calls.append((self.command, url.path, parse_qs(url.query), body))
                if self.command == "POST":
                    key = f"{url.path}/{body['metadata']['name']}"
                    if key in server.objects:
                        self._reply(409, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409})
                        return
                    body["metadata"]["uid"] = str(uuid.uuid4())
                    server.objects[key] = body
                    self._reply(201, body)
                elif self.command == "GET" and url.path not in server.objects and not url.path.split("/")[-1].startswith("exp-"):
                    wanted = _selector(parse_qs(url.query))
                    items = [o for k, o in server.objects.items() if k.rsplit("/", 1)[0] == url.path
                             and wanted.items() <= o["metadata"].get("labels", {}).items()]
                    self._reply(200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items})
                elif self.command == "GET":
                    job = server.objects.get(url.path)
                    if job is None:
                        self._reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
                        return
                    default = {"active": server.job_active, "conditions": server.job_conditions}
                    status = server.job_status_by_name.get(url.path.rsplit("/", 1)[-1], default)
                    self._reply(200, {**job, "status": status})
                elif self.command == "DELETE":
                    found = server.objects.get(url.path)
                    if found is None:
                        self._reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
                        return
                    precondition = ((body or {}).get("preconditions") or {}).get("uid")
                    if precondition is not None and precondition != found["metadata"]["uid"]:
                        self._reply(409, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409})
                        return
                    del server.objects[url.path]
                    # The API server answers a Service's deletion with the Service, others with a Status.
                    self._reply(200, found if found["kind"] == "Service" else {"kind": "Status", "apiVersion": "v1", "status": "Success"})

            do_POST = do_GET = do_DELETE = _handle

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

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
            "contexts": [{"name": "recorder", "context": {"cluster": "recorder", "user": "tester", "namespace": namespace}}],
            "current-context": "recorder",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def finish_job(self, job_name: str, condition: str, reason: str = "", message: str = "") -> None:
        """Make one Job report a Complete or Failed condition."""
        self.job_status_by_name[job_name] = {
            "active": 0, "conditions": [{"type": condition, "status": "True", "reason": reason, "message": message}],
        }

    def count(self, method: str) -> int:
        return sum(1 for call in self.calls if call[0] == method)
