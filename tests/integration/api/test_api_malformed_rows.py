"""An experiment's malformed metrics rows and status values never make the API fail (issue #46, item 5).

An experiment's own processes write ``lecritique:<id>:metrics`` and ``:status``; the API reads them
for GET, list and metrics. Before: one ``"not json"`` row made all three return 500 (``json.loads``
unguarded in ``details()``). Now a row that is not a JSON object with an integer ``step`` is skipped
(GET and list show the latest well-formed row; metrics returns the rest and ``skipped_rows``), NaN
and infinities become null, and a status value that is not a finite number is ignored. In process,
kubernetes launcher on a recording endpoint, real Redis.
"""

from __future__ import annotations

import pytest
import redis
from fastapi.testclient import TestClient

from tests.helm_support import spec_data
from tests.integration.api.conftest import ALICE

AUTH = {"Authorization": f"Bearer {ALICE}"}
GOOD = '{"step": 1, "reward_mean": 0.25, "value_version": 3, "policy_version": 1}'
MALFORMED = [
    "not json",
    "[1, 2]",
    '"a string"',
    '{"step": "one"}',
    '{"step": true}',
    '{"step": 1.5}',
    "[" * 100_000,
    "",
]


def _experiment(api: TestClient) -> str:
    created = api.post("/v1/experiments", json=spec_data(), headers=AUTH)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


@pytest.mark.parametrize("row", MALFORMED, ids=lambda row: row[:12] or "empty")
def test_a_malformed_row_is_skipped_and_reported(api: TestClient, redis_db: redis.Redis, row: str) -> None:
    experiment = _experiment(api)
    redis_db.rpush(f"lecritique:{experiment}:metrics", GOOD, row)
    view = api.get(f"/v1/experiments/{experiment}", headers=AUTH)
    assert view.status_code == 200, view.text
    assert view.json()["latest_metrics"]["step"] == 1 and view.json()["value_version"] == 3
    listed = api.get("/v1/experiments", headers=AUTH)
    assert listed.status_code == 200, listed.text
    metrics = api.get(f"/v1/experiments/{experiment}/metrics", headers=AUTH)
    assert metrics.status_code == 200, metrics.text
    assert metrics.json()["rows"] == [
        {"step": 1, "reward_mean": 0.25, "value_version": 3, "policy_version": 1}
    ]
    assert metrics.json()["skipped_rows"] == 1
    since = api.get(f"/v1/experiments/{experiment}/metrics", params={"since_step": 0}, headers=AUTH)
    assert since.status_code == 200 and since.json()["skipped_rows"] == 1


def test_only_malformed_rows_leave_no_latest_metrics(api: TestClient, redis_db: redis.Redis) -> None:
    experiment = _experiment(api)
    redis_db.rpush(f"lecritique:{experiment}:metrics", *MALFORMED)
    view = api.get(f"/v1/experiments/{experiment}", headers=AUTH)
    assert view.status_code == 200, view.text
    assert view.json()["latest_metrics"] is None and view.json()["step"] is None
    assert api.get(f"/v1/experiments/{experiment}/metrics", headers=AUTH).json()["skipped_rows"] == len(
        MALFORMED
    )


def test_non_finite_numbers_become_null(api: TestClient, redis_db: redis.Redis) -> None:
    experiment = _experiment(api)
    redis_db.rpush(
        f"lecritique:{experiment}:metrics",
        '{"step": 2, "value_explained_variance": NaN, "tether_rho": Infinity, "value_version": -Infinity}',
    )
    view = api.get(f"/v1/experiments/{experiment}", headers=AUTH)
    assert view.status_code == 200, view.text
    latest = view.json()["latest_metrics"]
    assert latest["value_explained_variance"] is None and latest["tether_rho"] is None
    assert view.json()["value_version"] is None and view.json()["step"] == 2


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "not a number", "1e999", ""])
def test_a_status_value_that_is_no_finite_number_is_ignored(
    api: TestClient, redis_db: redis.Redis, value: str
) -> None:
    experiment = _experiment(api)
    redis_db.hset(f"lecritique:{experiment}:status", mapping={"step": value, "policy_version": 4})
    view = api.get(f"/v1/experiments/{experiment}", headers=AUTH)
    assert view.status_code == 200, view.text
    assert view.json()["step"] is None and view.json()["policy_version"] == 4


def test_metrics_lines_and_the_report_skip_a_malformed_row(api: TestClient, redis_db: redis.Redis) -> None:
    experiment = _experiment(api)
    redis_db.rpush(
        f"lecritique:{experiment}:metrics", GOOD, "not json", GOOD.replace('"step": 1', '"step": 2')
    )
    page = api.get(f"/v1/experiments/{experiment}/metrics.jsonl", headers=AUTH)
    assert page.status_code == 200, page.text
    assert [line for line in page.text.splitlines() if line] == [
        '{"step":1,"reward_mean":0.25,"value_version":3,"policy_version":1}',
        '{"step":2,"reward_mean":0.25,"value_version":3,"policy_version":1}',
    ]
    assert page.headers["X-Total-Rows"] == "3" and page.headers["X-Skipped-Rows"] == "1"
    first = api.get(f"/v1/experiments/{experiment}/metrics.jsonl", params={"limit": 2}, headers=AUTH)
    assert first.headers["X-Next-Offset"] == "2", first.headers
    report = api.get(f"/v1/experiments/{experiment}/report.md", headers=AUTH)
    assert report.status_code == 200, report.text
