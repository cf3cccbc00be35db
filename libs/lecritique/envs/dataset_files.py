"""Rows of a dataset on disk: JSON lines, CSV, Parquet, or a Hugging Face ``save_to_disk`` directory.

Every reader returns :class:`Row` objects that remember where they came from (row number, and the
line for text formats), so that a bad value is reported as ``data.csv row 17 (line 18), column
'answer': ...``. Nothing is downloaded: Hugging Face directories are read with
``datasets.load_from_disk`` with the hub switched off.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

DatasetFormat = Literal["auto", "jsonl", "csv", "parquet", "hf_disk"]
SPLIT_NAME_COLUMN = "_split"
"""Virtual column holding the split name of each row of a Hugging Face ``DatasetDict``."""

_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file, and the row and column where known."""


@dataclass(frozen=True)
class Row:
    number: int
    """1-based position among the dataset's rows (as read, before any split)."""
    where: str
    """Human-readable location: ``row 17 (line 18)``."""
    values: dict[str, Any]
    """Column -> value, as the file holds it."""


ROOTS_ENV = "LECRITIQUE_DATASET_ROOTS"
"""Folders (``:``-separated) datasets must lie in, when set: the REST API's launchers set the
tenant's dataset roots here so that a spec cannot read other files of the machine (error messages
quote a file's first cells)."""


def _roots() -> list[Path]:
    return [Path(root).resolve() for root in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if root.strip()]


def _refuse(path: Path, roots: list[Path], where: str = "") -> DatasetError:
    return DatasetError(
        f"dataset {path}{where} is outside the allowed folders ({ROOTS_ENV}: {', '.join(map(str, roots))})"
    )


def check_allowed(path: Path) -> None:
    """Refuse ``path`` when ``LECRITIQUE_DATASET_ROOTS`` is set and no root contains it (symlinks resolved)."""
    roots = _roots()
    if roots and not any(path.resolve().is_relative_to(root) for root in roots):
        raise _refuse(path, roots)


@contextlib.contextmanager
def opened(path: Path) -> Iterator[Path]:
    """The path to read ``path`` through: itself when no roots are set; else ``/proc/self/fd/N`` of a
    descriptor whose real target was checked against the roots after opening it, so that a file
    swapped for a symbolic link after any earlier check is never followed out of the roots."""
    roots = _roots()
    if not roots:
        yield path
        return
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as error:
        raise DatasetError(f"dataset {path} cannot be opened: {error.strerror}") from None
    try:
        target = Path(os.readlink(f"/proc/self/fd/{descriptor}"))
        if not any(target.is_relative_to(root) for root in roots):
            raise _refuse(path, roots, f" (opened as {target})")
        yield Path(f"/proc/self/fd/{descriptor}")
    finally:
        os.close(descriptor)


def detect_format(path: Path, declared: DatasetFormat, source: Path | None = None) -> DatasetFormat:
    if declared != "auto":
        return declared
    if (source or path).is_dir():
        return "hf_disk"
    detected = _SUFFIXES.get(path.suffix.lower())
    if detected is None:
        raise DatasetError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r}; set 'format' (jsonl, csv, parquet, hf_disk)"
        )
    return detected  # type: ignore[return-value]


def read_rows(
    path: Path,
    declared: DatasetFormat = "auto",
    hf_splits: tuple[str, ...] = (),
    problems: list[tuple[int, str]] | None = None,
) -> list[Row]:
    """Every row of the dataset at ``path`` (confined to ``LECRITIQUE_DATASET_ROOTS`` when set, where it is opened).

    A row that cannot be read (a line that is not JSON, a CSV row with more cells than the
    header) raises :class:`DatasetError`, or, when ``problems`` is given, is left out with its
    number and message appended there, so that one pass finds every bad row."""
    check_allowed(path)
    if not path.exists():
        raise DatasetError(f"dataset {path} does not exist")
    with opened(path) as source:
        kind = detect_format(path, declared, source)
        if kind in ("jsonl", "csv"):
            rows = []
            reader = _jsonl_rows if kind == "jsonl" else _csv_rows
            for number, read in reader(path, source):
                if isinstance(read, Row):
                    rows.append(read)
                elif problems is None:
                    raise read
                else:
                    problems.append((number, str(read)))
            return rows
        if kind == "parquet":
            return _numbered(_parquet_records(path, source))
        return _numbered(_hf_records(path, hf_splits, source))


def _jsonl_rows(path: Path, source: Path) -> Iterator[tuple[int, Row | DatasetError]]:
    number = 0
    with source.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            number += 1
            where = f"row {number} (line {line_number})"
            try:
                values = json.loads(line)
            except json.JSONDecodeError as error:
                yield number, DatasetError(f"{path} {where}: not valid JSON: {error.msg}")
                continue
            if not isinstance(values, dict):
                yield (
                    number,
                    DatasetError(f"{path} {where}: expected a JSON object, got {type(values).__name__}"),
                )
                continue
            yield number, Row(number, where, values)


def _csv_rows(path: Path, source: Path) -> Iterator[tuple[int, Row | DatasetError]]:
    with source.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            raise DatasetError(f"{path}: empty CSV file (no header row)")
        for number, values in enumerate(reader, start=1):
            where = f"row {number} (line {reader.line_num})"
            if None in values:  # more cells than header columns
                yield (
                    number,
                    DatasetError(
                        f"{path} {where}: {len(values[None]) + len(reader.fieldnames)} cells but {len(reader.fieldnames)} header columns"
                    ),
                )
                continue
            # A short row leaves the missing cells None; an empty cell is "" (treated as missing later).
            yield number, Row(number, where, dict(values))


def _numbered(records: list[dict[str, Any]]) -> list[Row]:
    return [Row(number, f"row {number}", values) for number, values in enumerate(records, start=1)]


def _parquet_records(path: Path, source: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise DatasetError("reading Parquet needs pyarrow: pip install 'lecritique[data]'") from None
    try:
        records: list[dict[str, Any]] = parquet.read_table(str(source)).to_pylist()
    except Exception as error:  # pyarrow raises its own error types for corrupt files
        raise DatasetError(f"{path}: not a readable Parquet file: {error}") from None
    return records


def _hf_records(path: Path, splits: tuple[str, ...], source: Path) -> list[dict[str, Any]]:
    # Never reach the hub: a dataset must already be on disk (``Dataset.save_to_disk``).
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            "reading a Hugging Face dataset directory needs datasets: pip install 'lecritique[data]'"
        ) from None
    try:
        loaded = datasets.load_from_disk(str(source))
    except (FileNotFoundError, ValueError) as error:
        raise DatasetError(f"{path}: not a directory written by save_to_disk: {error}") from None
    if isinstance(loaded, datasets.DatasetDict):
        names = splits or tuple(loaded.keys())
        unknown = [name for name in names if name not in loaded]
        if unknown:
            raise DatasetError(
                f"{path}: no split(s) {', '.join(unknown)} in the DatasetDict (it has {', '.join(loaded)})"
            )
        records = []
        for name in names:
            records += [{**record, SPLIT_NAME_COLUMN: name} for record in loaded[name].to_list()]
        return records
    if splits:
        raise DatasetError(
            f"{path}: hf_splits is set but the directory holds a single Dataset, not a DatasetDict"
        )
    single: list[dict[str, Any]] = loaded.to_list()
    return single


def cell_text(value: Any) -> str | None:
    """A cell as text: numbers and booleans printed, lists and mappings as JSON; None for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value))
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)
