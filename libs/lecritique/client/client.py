"""A typed Python client of the lecritique REST API.

>>> from lecritique.client import LecritiqueClient
>>> with LecritiqueClient("http://api:8000", token="...") as api:
...     experiment = api.submit("examples/sudoku-mini-pvf.yaml")
...     finished = api.wait(experiment.id)
...     rows = api.metrics(experiment.id)
...     api.download_report(experiment.id, "report/")

Without arguments the URL and token come from ``LECRITIQUE_API_URL`` / ``LECRITIQUE_API_TOKEN`` or
the file ``lecritique login`` writes (:mod:`lecritique.client.settings`).
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from lecritique.client.models import Experiment
from lecritique.client.settings import resolve_settings
from lecritique.client.transport import RetryCallback, RetryPolicy, Transport


def spec_document(spec: Mapping[str, Any] | str | Path | Any) -> dict[str, Any]:
    """The JSON body of a submission: a mapping, a pydantic spec, or a YAML/JSON file as written.

    Files are sent as written: the API validates the spec, and paths in it (a dataset file, a
    model) are read where the experiment runs, not here.
    """
    if isinstance(spec, str | Path):
        path = Path(spec)
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ValueError(f"{path}: an experiment spec must be a mapping, got {type(data).__name__}")
        return data
    if hasattr(spec, "model_dump"):
        return dict(spec.model_dump(mode="json"))
    return dict(spec)


class LecritiqueClient:
    def __init__(
        self,
        api_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: RetryCallback | None = None,
    ) -> None:
        """``on_retry`` sees each failed try before the wait that follows it (the commands print it)."""
        settings = resolve_settings(api_url, token)
        self.api_url = settings.api_url
        self._transport = Transport(
            settings.api_url,
            settings.token,
            timeout=timeout,
            retry=retry,
            sleep=sleep,
            token_source=settings.token_source,
            on_retry=on_retry,
        )
        self._sleep = sleep

    def __enter__(self) -> LecritiqueClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    # ---- experiments -----------------------------------------------------------------------
    def submit(
        self, spec: Mapping[str, Any] | str | Path | Any, idempotency_key: str | None = None
    ) -> Experiment:
        """Submit a spec; retries reuse one Idempotency-Key, so at most one experiment starts."""
        key = idempotency_key or uuid.uuid4().hex
        response = self._transport.request(
            "POST", "/v1/experiments", json=spec_document(spec), headers={"Idempotency-Key": key}
        )
        return Experiment.model_validate(response.json())

    def list(self, limit: int = 100, offset: int = 0) -> list[Experiment]:
        """Your experiments, newest first."""
        response = self._transport.request(
            "GET", "/v1/experiments", params={"limit": limit, "offset": offset}
        )
        return [Experiment.model_validate(item) for item in response.json()["experiments"]]

    def get(self, experiment_id: str) -> Experiment:
        return Experiment.model_validate(
            self._transport.request("GET", f"/v1/experiments/{experiment_id}").json()
        )

    def cancel(self, experiment_id: str) -> Experiment:
        """Ask the API to stop it (status ``cancelling``, then ``cancelled``)."""
        return Experiment.model_validate(
            self._transport.request("DELETE", f"/v1/experiments/{experiment_id}").json()
        )

    def wait(
        self,
        experiment_id: str,
        *,
        poll_seconds: float = 5.0,
        timeout: float | None = None,
        on_update: Callable[[Experiment], None] | None = None,
    ) -> Experiment:
        """Poll until it succeeded, failed or was cancelled; ``on_update`` sees every poll."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            experiment = self.get(experiment_id)
            if on_update is not None:
                on_update(experiment)
            if experiment.final:
                return experiment
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"experiment {experiment_id} is still {experiment.status} after {timeout:.0f} s"
                )
            self._sleep(poll_seconds)

    # ---- what an experiment produced -------------------------------------------------------
    def iter_metrics(
        self, experiment_id: str, offset: int = 0, page_size: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Metrics rows from ``offset`` on, fetched a page at a time."""
        next_offset: int | None = offset
        while next_offset is not None:
            response = self._transport.request(
                "GET",
                f"/v1/experiments/{experiment_id}/metrics.jsonl",
                params={"offset": next_offset, "limit": page_size},
            )
            for line in response.text.splitlines():
                if line.strip():
                    yield json.loads(line)
            following = response.headers.get("X-Next-Offset")
            next_offset = int(following) if following is not None else None

    def metrics(
        self, experiment_id: str, offset: int = 0, page_size: int = 1000
    ) -> builtins.list[dict[str, Any]]:
        """Every metrics row (one per policy step) from ``offset`` on."""
        return list(self.iter_metrics(experiment_id, offset, page_size))

    def logs(self, experiment_id: str, component: str = "run", tail: int = 200) -> str:
        """The last lines of a local run's log (``run``, or a service: ``orchestrator``, ``rollout-0``, ...)."""
        response = self._transport.request(
            "GET", f"/v1/experiments/{experiment_id}/logs", params={"component": component, "tail": tail}
        )
        return response.text

    def report(self, experiment_id: str) -> tuple[bytes, str]:
        """The report as (PNG bytes, Markdown text), drawn from the metrics recorded so far."""
        png = self._transport.request("GET", f"/v1/experiments/{experiment_id}/report.png").content
        markdown = self._transport.request("GET", f"/v1/experiments/{experiment_id}/report.md").text
        return png, markdown

    def download_report(self, experiment_id: str, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``report.png`` and ``report.md`` into ``out_dir``; returns their paths."""
        png, markdown = self.report(experiment_id)
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.png").write_bytes(png)
        (folder / "report.md").write_text(markdown)
        return folder / "report.png", folder / "report.md"
