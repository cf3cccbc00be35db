"""One request cannot stall the API for every tenant (issue #46, item 4, security round 4).

Over real HTTP against a real API process (``lecritique api serve``, kubernetes launcher on a
recording Kubernetes endpoint, real Redis). Each attack of the issue is sent while ``/healthz`` is
polled: every health request must be answered within :data:`STALL_SECONDS` (a bound only a stall
breaks; a probe answers in milliseconds), and the attack itself must be answered (refused, or
accepted where it is within the quotas) instead of holding a worker thread.

Before the fix: a YAML body of a few hundred KiB held the event loop for 5-29 s (the pure-Python
YAML loader ran on it); ``critic.batch_size: 1`` with ``critic.replay.max_reuse: 1e9`` was never
answered (the replay budget counted to ~1.3e11 during validation); a generative critic of 1024 x
1024 x 32,768 x 4,096 tokens and a replay buffer of 10^7 trajectories were accepted (201).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from services.api.body import MAX_NODES
from tests.helm_support import spec_data
from tests.integration.api.api_process import ApiProcess
from tests.integration.api.conftest import kubernetes_api_settings
from tests.integration.api.kubernetes_recorder import RecordingApiServer

TOKEN = "stall-token"
MODEL = "/weights/models/bob/policy"
STALL_SECONDS = 5.0
"""Longest a health probe may wait: generous (it answers in milliseconds); a stall takes longer."""


def api_settings(folder: Path, redis_url: str, recorder: RecordingApiServer) -> dict[str, str]:
    """A real API process for the module (the ``api`` fixture of ``conftest.py``): bob may run 100
    experiments at once, so the attacks meet the bounds under test, not the running quota."""
    return kubernetes_api_settings(
        folder, redis_url, recorder, {"bob": TOKEN}, {"bob": {"maxRunningExperiments": 100}}
    )


@dataclass
class Watched:
    """What the API answered to one attack while its health was polled."""

    responses: list[httpx.Response]
    health_seconds: list[float] = field(default_factory=list)
    answered_during: int = 0
    """Health requests answered while an attack was still in flight."""


def _while_polling_health(api: ApiProcess, attacks: list[Callable[[], httpx.Response]]) -> Watched:
    """Send ``attacks`` at once and poll ``/healthz`` until every one is answered."""
    watched = Watched(responses=[])
    with ThreadPoolExecutor(max_workers=len(attacks)) as pool, httpx.Client(base_url=api.url) as probe:
        futures = [pool.submit(attack) for attack in attacks]
        started = threading.Event()
        pool.submit(started.set)
        started.wait(5)
        while True:
            in_flight = not all(future.done() for future in futures)
            begun = time.monotonic()
            health = probe.get("/healthz", timeout=120)
            watched.health_seconds.append(time.monotonic() - begun)
            assert health.status_code == 200 and health.text == "ok", health.text
            if in_flight and not all(future.done() for future in futures):
                watched.answered_during += 1
            if not in_flight:
                break
            time.sleep(0.05)
        watched.responses = [future.result() for future in futures]
    return watched


def _post(api: ApiProcess, body: Any, content_type: str = "application/json") -> Callable[[], httpx.Response]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()

    def send() -> httpx.Response:
        with api.client(TOKEN) as client:
            return client.post(
                "/v1/experiments", content=content, headers={"Content-Type": content_type}, timeout=300
            )

    return send


def _no_stall(watched: Watched) -> None:
    assert watched.health_seconds, "no health probe was sent"
    slowest = max(watched.health_seconds)
    assert slowest < STALL_SECONDS, f"/healthz waited {slowest:.1f} s while the attack was processed"


def _refused(response: httpx.Response, status: int, field_name: str, *said: str) -> None:
    assert response.status_code == status, response.text
    messages = {item["field"]: item["message"] for item in response.json()["detail"]}
    assert field_name in messages, messages
    for text in said:
        assert text in messages[field_name], messages[field_name]


def _yaml_spec_with_many_values(target_bytes: int) -> bytes:
    """A YAML spec of about ``target_bytes`` (under the 1 MiB body limit) made of many small values."""
    head = "name: sudoku-mini\nenvironment: {kind: sudoku, size: 4, empty_cells: [3, 4]}\n"
    head += f"policy: {{path: {MODEL}}}\nextra:\n"
    rows, size, index = [], len(head), 0
    while size < target_bytes:
        row = f"  k{index}: [{index}, {index}, {index}]\n"
        rows.append(row)
        size += len(row)
        index += 1
    return (head + "".join(rows)).encode()


def test_a_large_yaml_body_does_not_stall_the_api(api: ApiProcess) -> None:
    body = _yaml_spec_with_many_values(900 * 1024)
    watched = _while_polling_health(api, [_post(api, body, "application/yaml")])
    _no_stall(watched)
    _refused(watched.responses[0], 422, "body", f"more than {MAX_NODES} values")


def test_a_large_json_body_is_held_to_the_same_bound(api: ApiProcess) -> None:
    data = spec_data(policy={"path": MODEL}, extra=[[index, index] for index in range(40_000)])
    watched = _while_polling_health(api, [_post(api, data)])
    _no_stall(watched)
    _refused(watched.responses[0], 422, "body", f"more than {MAX_NODES} values")


def test_a_large_yaml_body_within_the_node_bound_is_read(api: ApiProcess) -> None:
    """Size alone is no attack: a spec with a long string is read and validated as usual."""
    text = f"name: sudoku-mini\nenvironment: {{kind: sudoku, size: 4, empty_cells: [3, 4]}}\npolicy: {{path: {MODEL}}}\n"
    text += "critic: {kind: generative, actor_description: '" + "x" * 700_000 + "'}\n"
    watched = _while_polling_health(api, [_post(api, text.encode(), "application/yaml")])
    _no_stall(watched)
    assert watched.responses[0].status_code == 201, watched.responses[0].text[:500]


def test_a_replay_budget_of_1e9_reuses_is_answered_at_once(api: ApiProcess) -> None:
    """The issue's 638-byte spec (sent eight times at once: before, six filled the API's threads)."""
    spec = spec_data(
        policy={"path": MODEL},
        critic={
            "kind": "discriminative",
            "context": "reference",
            "batch_size": 1,
            "replay": {"max_reuse": 1_000_000_000},
        },
    )
    watched = _while_polling_health(api, [_post(api, spec) for _ in range(8)])
    _no_stall(watched)
    for response in watched.responses:
        assert response.status_code == 201, response.text


def test_a_replay_budget_of_1e9_reuses_in_yaml_is_answered_too(api: ApiProcess) -> None:
    text = (
        f"name: sudoku-mini\nenvironment: {{kind: sudoku, size: 4, empty_cells: [3, 4]}}\npolicy: {{path: {MODEL}}}\n"
        "critic: {kind: discriminative, context: reference, batch_size: 1, replay: {max_reuse: 1000000000}}\n"
    )
    watched = _while_polling_health(api, [_post(api, text.encode(), "application/yaml")])
    _no_stall(watched)
    assert watched.responses[0].status_code == 201, watched.responses[0].text


def test_a_generative_critics_tokens_count_against_the_quota(api: ApiProcess) -> None:
    spec = spec_data(
        policy={"path": MODEL},
        critic={
            "kind": "generative",
            "eval_samples": 1024,
            "samples_per_state": 1024,
            "max_tokens": 32_768,
            "segments": {"max_segments": 4096},
        },
    )
    watched = _while_polling_health(api, [_post(api, spec)])
    _no_stall(watched)
    _refused(watched.responses[0], 422, "critic", "maxTokensPerStep", "eval_samples 1024", "33554432")


def test_a_replay_of_ten_million_trajectories_counts_against_the_memory_quota(api: ApiProcess) -> None:
    spec = spec_data(
        policy={"path": MODEL},
        rollout={"tasks_per_step": 16_384, "group_size": 4},
        critic={
            "kind": "discriminative",
            "context": "reference",
            "replay": {"capacity": 10**7, "max_reuse": 1000},
        },
    )
    watched = _while_polling_health(api, [_post(api, spec)])
    _no_stall(watched)
    _refused(
        watched.responses[0], 422, "critic.replay.capacity", "maxReplayMemoryGib", "10000000 trajectories"
    )
