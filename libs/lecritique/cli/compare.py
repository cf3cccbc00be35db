"""``lecritique compare RUN... --out DIR``: several runs in one table and one figure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders (`lecritique run --out`), each holding metrics.jsonl.",
            exists=True,
            file_okay=False,
        ),
    ],
    out: Annotated[Path, typer.Option(help="Folder for compare.md and compare.png (created).")],
) -> None:
    """Compare runs (e.g. a critic and its MEAN baseline): OUT/compare.md, one row per run, and
    OUT/compare.png, reward and held-out success against policy steps and wall time."""
    from lecritique.reporting.compare import write_comparison

    try:
        png, md = write_comparison(list(runs), out)
    except (FileNotFoundError, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(f"wrote {md} and {png}")
