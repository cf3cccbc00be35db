"""``lecritique report DIR``: plots and a markdown summary of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    run_dir: Annotated[
        Path, typer.Argument(help="Run directory holding metrics.jsonl.", exists=True, file_okay=False)
    ],
) -> None:
    """Write RUN_DIR/report.png (reward, explained variance, rho) and RUN_DIR/report.md."""
    from lecritique.reporting import write_report

    png, md = write_report(run_dir)
    typer.echo(f"wrote {png} and {md}")
