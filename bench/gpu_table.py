"""The README's GPU table, generated from docs/bench-gpu.json (written by ``bench/gpu_perf.py`` on CUDA).

    python bench/gpu_table.py           # print the table
    python bench/gpu_table.py --write   # replace the table between the README's markers

No figure is typed by hand: without the JSON the table says "Not yet measured".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
JSON_PATH = REPO_ROOT / "docs" / "bench-gpu.json"
README = REPO_ROOT / "README.md"
START, END = "<!-- gpu-table:start -->", "<!-- gpu-table:end -->"
NOT_MEASURED = "Not yet measured: no `docs/bench-gpu.json` from a GPU run (`make bench-gpu`)."


def _measured(stage: dict[str, Any]) -> str:
    if "gb_per_s" in stage:
        text = f"{stage['gb_per_s']:.2f} GB/s ({stage['bytes'] / 1e9:.2f} GB in {stage['seconds']:.2f} s)"
        return text + (", replica equal" if stage.get("replica_equal") else "")
    text = f"{stage['tokens_per_s']:,.0f} tokens/s, {stage['tflop_per_s']:.1f} TFLOP/s"
    if "padding_fraction" in stage:
        text += f", padding {stage['padding_fraction']:.3f}"
    return text


def render(data: dict[str, Any] | None) -> str:
    """The markdown table of ``data`` (the JSON's content), or the not-measured line."""
    if data is None:
        return NOT_MEASURED
    environment, peak = data["environment"], data["peak"]
    lines = [
        f"{environment['device_name']}, torch {environment['torch']}, {environment['date']}; "
        f"{data['model']['parameters'] / 1e9:.2f} B parameters, {data['batch']['tokens']:,} tokens a step; "
        f"measured {peak['dtype']} matmul peak {peak['flops_per_s'] / 1e12:.0f} TFLOP/s"
        + (" (a partial run: stopped before its last stage)." if data.get("partial") else "."),
        "",
        "| path | measured | of the matmul peak |",
        "|---|---|---|",
    ]
    for stage in data["stages"]:
        fraction = f"{stage['fraction_of_peak']:.3f}" if "fraction_of_peak" in stage else "—"
        lines.append(f"| {stage['stage']} | {_measured(stage)} | {fraction} |")
    return "\n".join(lines)


def load(path: Path = JSON_PATH) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def readme_table(text: str) -> str:
    """What the README holds between the markers."""
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help="replace the README's table")
    args = parser.parse_args()
    table = render(load())
    if not args.write:
        print(table)
        return
    text = README.read_text()
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    README.write_text(f"{before}{START}\n{table}\n{END}{after}")


if __name__ == "__main__":
    main()
