"""``lecritique compare RUN... [--vs RUN...] --out DIR``: several runs in one table and one figure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

VERSUS = "--vs"
"""The word between two arms' runs (``compare A1 A2 --vs B1 B2``): a separator the command reads
itself (it takes any number of runs on each side), not an option with one value."""


def compare(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run folders (`lecritique run --out`), each holding metrics.jsonl. Two arms of several "
            "runs each: `A1 A2 --vs B1 B2` (paired by seed; A - B with a 95% interval), or LABEL=DIR "
            "arguments naming two arms.",
            metavar="RUN... [--vs RUN...]",
        ),
    ],
    out: Annotated[Path, typer.Option(help="Folder for compare.md and compare.png (created).")],
) -> None:
    """Compare runs (e.g. a critic and its MEAN baseline): OUT/compare.md, one row per run with the
    noise of its own steps, and OUT/compare.png, reward and held-out success against policy steps
    and wall time. One run per arm is described, not ranked; several per arm (`--vs`, or
    LABEL=DIR) add paired differences with 95% intervals."""
    from lecritique.reporting.compare import write_comparison

    try:
        folders, arms = parse_arms(runs)
        png, md = write_comparison(folders, out, arms)
    except (FileNotFoundError, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(f"wrote {md} and {png}")


def parse_arms(words: list[str]) -> tuple[list[Path], list[str] | None]:
    """The run folders and each one's arm (None: one run per arm) from ``A1 A2 --vs B1 B2`` or
    ``LABEL=DIR`` words; a folder that does not exist, or a mix of the two forms, is refused."""
    if words.count(VERSUS) > 1:
        raise ValueError(f"{VERSUS} separates two arms: give it once (A1 A2 {VERSUS} B1 B2)")
    labelled = ["=" in word for word in words if word != VERSUS]
    if VERSUS in words and any(labelled):
        raise ValueError(f"name arms either with {VERSUS} or with LABEL=DIR, not both")
    arms: list[str] | None = None
    if VERSUS in words:
        split = words.index(VERSUS)
        first, second = words[:split], words[split + 1 :]
        if not first or not second:
            raise ValueError(f"{VERSUS} needs runs on both sides: A1 A2 {VERSUS} B1 B2")
        words, arms = first + second, ["A"] * len(first) + ["B"] * len(second)
    elif labelled and all(labelled):
        arms = [word.split("=", 1)[0] for word in words]
        words = [word.split("=", 1)[1] for word in words]
    elif any(labelled):
        raise ValueError("either every run is LABEL=DIR or none is")
    folders = [Path(word) for word in words]
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"run folder {folder} does not exist")
    return folders, arms
