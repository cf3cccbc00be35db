"""Draw the chart's Grafana dashboards from a real run: docs/dashboards/<dashboard>.{json,png}.

No Grafana runs on this machine, so the pictures come from the dashboards' own queries:

    python helm/render_dashboards.py record --spec examples/five-minutes/tether-pvf.yaml \\
        --set orchestrator.steps=30 --out runs/dashboards
    python helm/render_dashboards.py draw

``record`` runs the spec for real as ``lecritique run`` does (every service a local process, the
embedded Redis), with a real Prometheus (Debian's ``prometheus`` package) scraping every process
each second; when the run ends it asks Prometheus for every dashboard panel's PromQL over the run
(``query_range``; ``$experiment`` and ``$__rate_interval`` filled in as Grafana would) and writes
one record per dashboard, then draws it. ``draw`` re-draws the pictures from the records (after a
change of the drawing code). tests/unit/chart/test_dashboard_pictures.py fails when a dashboard panel
has no picture, or a record's queries are no longer the dashboard's (then run ``record`` again).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "libs")]

from lecritique.monitoring.pictures import (  # noqa: E402
    RATE_INTERVAL,
    draw_dashboard,
    filled_query,
    picture_panels,
    picture_sha256,
    series_from_matrix,
)

DASHBOARDS_DIR = ROOT / "helm" / "lecritique" / "dashboards"
PICTURES_DIR = ROOT / "docs" / "dashboards"
STEP_SECONDS = 2.0
"""Resolution of the range queries (Prometheus scrapes every second)."""


def _dashboards() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(DASHBOARDS_DIR.glob("*.json"))}


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def _record_run(
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, list[tuple[str, list[dict[str, Any]]]]]]:
    """Run the spec under a scraping Prometheus; (the run's description, dashboard -> [(expr, matrix)])."""
    from lecritique.cli.tiny_policy import with_tiny_policy_built
    from lecritique.config import load_spec
    from lecritique.launch.local.launcher import LocalLauncher
    from lecritique.monitoring.prometheus import PrometheusServer, free_port

    spec = with_tiny_policy_built(load_spec(args.spec, overrides=args.set))
    out = Path(args.out).resolve()
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty: the pictures come from one fresh run")
    launcher = LocalLauncher(spec, out)
    prometheus: PrometheusServer | None = None
    queried: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {}
    try:
        print("starting the services", flush=True)
        launcher.start_services()
        targets = {
            process.name: process.metrics_port for process in launcher.services if process.metrics_port
        }
        orchestrator_port = free_port()
        prometheus = PrometheusServer(
            out / "prometheus", {**targets, "orchestrator": orchestrator_port}
        ).start()
        start = time.time()
        print(f"Prometheus on {prometheus.url}; starting the orchestrator", flush=True)
        launcher.start_orchestrator(metrics_port=orchestrator_port)
        code = launcher.wait(lambda row: print(f"step {row['step']}", flush=True))
        if code != 0:
            raise SystemExit(f"the run failed (exit {code}): {out / 'logs'}")
        time.sleep(3)  # the services' last scrape
        end = time.time()
        for stem, dashboard in _dashboards().items():
            queried[stem] = []
            for panel in picture_panels(dashboard):
                for target in panel.get("targets", []):
                    query = filled_query(target["expr"], launcher.experiment_id)
                    queried[stem].append(
                        (target["expr"], prometheus.query_range(query, start, end, STEP_SECONDS))
                    )
    finally:
        if prometheus is not None:
            prometheus.stop()
        launcher.stop()
    steps = sum(
        1 for line in (out / "metrics.jsonl").read_text().splitlines() if json.loads(line)["step"] > 0
    )
    run = {
        "spec": str(Path(args.spec)),
        "overrides": list(args.set),
        "experiment": launcher.experiment_id,
        "steps": steps,
        "recorded_on": datetime.date.today().isoformat(),
        "commit": _commit(),
        "start": start,
        "seconds": round(end - start, 1),
        "step_seconds": STEP_SECONDS,
        "rate_interval": RATE_INTERVAL,
    }
    return run, queried


def record(args: argparse.Namespace) -> None:
    run, queried = _record_run(args)
    PICTURES_DIR.mkdir(parents=True, exist_ok=True)
    for stem, dashboard in _dashboards().items():
        answers = dict(queried[stem])
        panels = []
        for panel in picture_panels(dashboard):
            entry: dict[str, Any] = {
                "type": panel["type"],
                "title": panel["title"],
                "gridPos": panel["gridPos"],
            }
            if panel["type"] == "timeseries":
                entry["unit"] = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
                entry["targets"] = [
                    {
                        "expr": target["expr"],
                        "legendFormat": target.get("legendFormat", ""),
                        "series": series_from_matrix(answers[target["expr"]], run["start"]),
                    }
                    for target in panel["targets"]
                ]
            panels.append(entry)
        _write(stem, {"dashboard": f"{stem}.json", "title": dashboard["title"], "run": run, "panels": panels})


def _write(stem: str, record_data: dict[str, Any]) -> None:
    png = draw_dashboard(record_data)
    record_data["picture"] = f"{stem}.png"
    record_data["picture_sha256"] = picture_sha256(png)
    (PICTURES_DIR / f"{stem}.png").write_bytes(png)
    (PICTURES_DIR / f"{stem}.json").write_text(json.dumps(record_data, indent=1) + "\n")
    print(f"wrote {PICTURES_DIR / stem}.png and .json", flush=True)


def draw(args: argparse.Namespace) -> None:
    for path in sorted(PICTURES_DIR.glob("*.json")):
        _write(path.stem, json.loads(path.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser(
        "record", help="run SPEC under a real Prometheus; write records and pictures"
    )
    recording.add_argument("--spec", required=True, help="experiment spec (YAML)")
    recording.add_argument(
        "--set", action="append", default=[], help="an override, as `lecritique run --set`"
    )
    recording.add_argument("--out", required=True, help="run directory (new or empty)")
    commands.add_parser("draw", help="re-draw every picture from its record")
    args = parser.parse_args()
    {"record": record, "draw": draw}[args.command](args)


if __name__ == "__main__":
    main()
