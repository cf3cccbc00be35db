"""The shipped example data file, and writers of the same rows in the other formats."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

EXAMPLE_DATA = (
    Path(__file__).resolve().parents[3] / "examples" / "datasets" / "arithmetic-word-problems.jsonl"
)


def example_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in EXAMPLE_DATA.read_text().splitlines()]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def split_sizes(environment: Any) -> dict[str, int]:
    """Rows of each split of a dataset environment."""
    return {split: len(tasks) for split, tasks in environment._tasks.items()}
