"""Write the Prometheus alerting rules (helm/lecritique/alerts/lecritique-alerts.rules.yaml).

    python helm/generate_alerts.py                       # the shipped file, default thresholds
    python helm/generate_alerts.py --out my.rules.yaml --set stall_minutes=30 --set api_5xx_fraction=0.01

The rules come from ``lecritique.monitoring.alerts`` (one source). The shipped file is a plain
Prometheus rules file (``rule_files:``); the chart wraps the same file in a PrometheusRule for the
Prometheus Operator (``alerts.enabled``). tests/integration/chart/test_alerts.py checks the committed file equals
this script's output and runs ``promtool test rules`` on it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES_FILE = ROOT / "helm" / "lecritique" / "alerts" / "lecritique-alerts.rules.yaml"


def main(argv: list[str] | None = None) -> None:
    sys.path.insert(0, str(ROOT / "libs"))
    from lecritique.monitoring.alerts import AlertThresholds, render_rules_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=RULES_FILE, help="Rules file to write.")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help=f"A threshold ({', '.join(AlertThresholds.model_fields)}).")
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.set)
    thresholds = AlertThresholds.model_validate(settings)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render_rules_file(thresholds))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
