"""Pictures of the chart's Grafana dashboards, drawn from a real run's metrics (no Grafana here).

A *record* holds, for every time-series panel of one dashboard, each target's PromQL exactly as
the dashboard JSON has it and the series a real Prometheus answered for it (a range query over a
local run it scraped; ``helm/render_dashboards.py`` makes the records). :func:`draw_dashboard`
lays the panels out on the dashboard's 24-column grid and draws each series with matplotlib,
named by the target's ``legendFormat``. The record keeps the picture's SHA-256, so a test can tell
a picture that no longer matches its record, and a record whose queries no longer match the
dashboard.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Iterator
from typing import Any

GRID_COLUMNS = 24
"""Grafana's grid: panel widths are in 24ths of the dashboard's width."""
RATE_INTERVAL = "20s"
"""What Grafana's ``$__rate_interval`` becomes over 1-second scrapes (4 scrapes and more)."""
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def picture_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The panels a picture draws, in the dashboard's order: rows (as headings) and time series
    (nested panels of collapsed rows included)."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield panel
            yield from (inner for inner in panel.get("panels", []) if inner.get("type") == "timeseries")
        elif panel.get("type") == "timeseries":
            yield panel


def filled_query(expression: str, experiment: str, rate_interval: str = RATE_INTERVAL) -> str:
    """A panel's PromQL with Grafana's variables filled in for one experiment."""
    return (
        expression.replace("${experiment:pipe}", experiment)
        .replace("$experiment", experiment)
        .replace("$__rate_interval", rate_interval)
    )


def legend_name(legend_format: str, labels: dict[str, str]) -> str:
    """Grafana's legend for a series: ``{{label}}`` replaced by the series' label value."""
    name = _LEGEND_LABEL.sub(lambda match: labels.get(match.group(1), ""), legend_format).strip()
    return name or ", ".join(f"{key}={value}" for key, value in sorted(labels.items())) or "value"


def series_from_matrix(result: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """Prometheus' matrix result as ``{"labels", "t" (seconds since start), "v"}`` series, sorted by labels."""
    series = []
    for item in result:
        points = [(float(t) - start, float(v)) for t, v in item["values"]]
        series.append(
            {
                "labels": dict(sorted(item["metric"].items())),
                "t": [round(t, 3) for t, _ in points],
                "v": [v if math.isfinite(v) else None for _, v in points],
            }
        )
    return sorted(series, key=lambda entry: sorted(entry["labels"].items()))


def draw_dashboard(record: dict[str, Any]) -> bytes:
    """The dashboard's picture (PNG bytes, no timestamp in them: the same record draws the same bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.gridspec import GridSpec

    panels = record["panels"]
    height = max(panel["gridPos"]["y"] + panel["gridPos"]["h"] for panel in panels)
    inches = 0.42 * height + 0.6
    figure = plt.figure(figsize=(16, inches), dpi=80)
    grid = GridSpec(
        height,
        GRID_COLUMNS,
        figure=figure,
        hspace=0.0,
        wspace=0.0,
        left=0.01,
        right=0.99,
        bottom=0.01,
        top=1 - 0.5 / inches,
    )
    run = record["run"]
    figure.suptitle(
        f"{record['title']}  (a real run: {run['spec']}, {run['steps']} policy steps, "
        f"{run['recorded_on']}; Prometheus range queries every {run['step_seconds']:g} s)",
        fontsize=12,
        x=0.01,
        y=1 - 0.15 / inches,
        ha="left",
    )
    for panel in panels:
        place = panel["gridPos"]
        rows = slice(place["y"], place["y"] + place["h"])
        columns = slice(place["x"], place["x"] + place["w"])
        if panel["type"] == "row":
            axis = figure.add_subplot(grid[rows, columns])
            axis.axis("off")
            axis.text(0.0, 0.2, panel["title"], fontsize=12, fontweight="bold", transform=axis.transAxes)
            continue
        # Leave room inside the panel's cell for the title, the axis labels and the legend.
        inner = grid[rows, columns].subgridspec(10, 20, hspace=0, wspace=0)[1:7, 2:19]
        axis = figure.add_subplot(inner)
        _draw_panel(axis, panel)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def _draw_panel(axis: Any, panel: dict[str, Any]) -> None:
    axis.set_title(panel["title"], fontsize=10, loc="left")
    drawn = 0
    for target in panel["targets"]:
        for series in target["series"]:
            values = [math.nan if value is None else value for value in series["v"]]
            axis.plot(
                series["t"],
                values,
                linewidth=1.2,
                label=legend_name(target["legendFormat"], series["labels"]),
            )
            drawn += 1
    if not drawn:
        axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes, color="grey")
    axis.set_xlabel("seconds since the run started", fontsize=8)
    unit = panel.get("unit", "short")
    if unit not in ("short", "none"):
        axis.set_ylabel(unit, fontsize=8)
    axis.tick_params(labelsize=7)
    axis.grid(alpha=0.3)
    if drawn:
        axis.legend(
            fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.28),
            ncol=2,
            frameon=False,
            handlelength=1.5,
        )


def picture_sha256(png: bytes) -> str:
    return hashlib.sha256(png).hexdigest()
