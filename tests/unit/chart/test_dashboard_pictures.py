"""Every Grafana dashboard of the chart has a picture in the docs, drawn from a real run by its own
queries (issue 48 item 8; ``helm/render_dashboards.py`` records a run under a real Prometheus and
draws it).

* each dashboard has ``docs/dashboards/<name>.json`` (the record: every panel's queries and the
  series Prometheus answered) and ``<name>.png``, and docs/observability.md shows the picture;
* the record's panels and queries are exactly the dashboard's (a panel added, renamed or re-queried
  in ``helm/generate_dashboards.py`` fails here until ``render_dashboards.py record`` runs again);
* the picture is the one drawn from that record (its SHA-256 recorded, and re-drawn here);
* the record holds real data: every panel has series with points, from a run of at least 20 steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lecritique.monitoring.pictures import draw_dashboard, picture_panels, picture_sha256
from tests.helm_support import ROOT, load_dashboards

PICTURES = ROOT / "docs" / "dashboards"
DASHBOARDS = load_dashboards()


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(title, [(expr, legendFormat), ...])`` of every time-series panel, as the JSON has them."""
    return [
        (panel["title"], [(target["expr"], target.get("legendFormat", "")) for target in panel["targets"]])
        for panel in picture_panels(dashboard)
        if panel.get("type") == "timeseries"
    ]


def record_queries(record: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The same list from a record (what its picture drew)."""
    return [
        (panel["title"], [(target["expr"], target["legendFormat"]) for target in panel["targets"]])
        for panel in record["panels"]
        if panel["type"] == "timeseries"
    ]


def finite_points(series: dict[str, Any]) -> int:
    return sum(value is not None for value in series["v"])


def _record(file_name: str) -> dict[str, Any]:
    path = PICTURES / file_name
    assert path.is_file(), (
        f"{file_name}: no record; run helm/render_dashboards.py record (its docstring says how)"
    )
    record: dict[str, Any] = json.loads(path.read_text())
    return record


@pytest.mark.parametrize("file_name", sorted(DASHBOARDS))
def test_every_panel_of_the_dashboard_is_in_its_picture_with_the_same_queries(file_name: str) -> None:
    record = _record(file_name)
    assert record["dashboard"] == file_name and record["title"] == DASHBOARDS[file_name]["title"]
    expected, drawn = panel_queries(DASHBOARDS[file_name]), record_queries(record)
    assert [title for title, _ in drawn] == [title for title, _ in expected], (
        f"{file_name}: the picture's panels differ from the dashboard's; run helm/render_dashboards.py record"
    )
    for (title, queries), (_, recorded) in zip(expected, drawn, strict=True):
        assert recorded == queries, f"{file_name}, panel {title!r}: the picture was drawn from other queries"


@pytest.mark.parametrize("file_name", sorted(DASHBOARDS))
def test_the_picture_is_drawn_from_its_record_of_a_real_run(file_name: str) -> None:
    record = _record(file_name)
    png = PICTURES / record["picture"]
    assert png.is_file()
    assert picture_sha256(png.read_bytes()) == record["picture_sha256"], (
        f"{png.name} is not the picture of {file_name}'s record: run helm/render_dashboards.py draw"
    )
    assert picture_sha256(draw_dashboard(record)) == record["picture_sha256"]
    assert record["run"]["steps"] >= 20
    empty = [
        f"{panel['title']}: {target['expr']}"
        for panel in record["panels"]
        if panel["type"] == "timeseries"
        for target in panel["targets"]
        if not any(finite_points(series) >= 2 for series in target["series"])
    ]
    assert not empty, f"{file_name}: panel queries without data in the recorded run: {empty}"


def test_the_observability_page_shows_every_picture_and_how_to_load_the_dashboards() -> None:
    page = (ROOT / "docs" / "observability.md").read_text()
    for file_name in DASHBOARDS:
        assert f"(dashboards/{Path(file_name).stem}.png)" in page, file_name
    assert 'grafana_dashboard: "1"' in page and "sidecar" in page and "Import" in page
