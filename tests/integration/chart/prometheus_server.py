"""A real Prometheus server (Debian's ``prometheus`` package) scraping local processes, for tests."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    """``prometheus`` on a free loopback port, scraping ``targets`` (job -> port) every second."""

    def __init__(self, workdir: Path, targets: dict[str, int], rule_files: Sequence[Path] = ()) -> None:
        binary = shutil.which("prometheus")
        assert binary, "prometheus is missing: install Debian's prometheus package (make test does)"
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(path) for path in rule_files],
                    "scrape_configs": [
                        {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                        for job, port in sorted(targets.items())
                    ],
                }
            )
        )
        self.log_path = workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with code {self.process.returncode}:\n{self.log_path.read_text()[-3000:]}"
                )
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready in {timeout:.0f} s:\n{self.log_path.read_text()[-3000:]}")

    def query(self, expression: str, at: float) -> list[dict[str, Any]]:
        """The result of an instant query at Unix time ``at``; raises on a PromQL error."""
        response = httpx.get(
            f"{self.url}/api/v1/query", params={"query": expression, "time": f"{at:.3f}"}, timeout=30
        )
        body = response.json()
        if body.get("status") != "success":
            raise ValueError(f"{expression}: {body.get('errorType')}: {body.get('error')}")
        return list(body["data"]["result"])

    def rules(self) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}/api/v1/rules", timeout=30).json()
        return [rule for group in body["data"]["groups"] for rule in group["rules"]]

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
