"""``lecritique critic-eval SPEC --out DIR``: compare critics against Monte-Carlo values of a fixed policy."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer


def critic_eval(
    spec: Annotated[Path, typer.Argument(help="critic-eval spec (YAML).", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option(help="Output directory: critic_eval.json, .md, .png.")],
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Value MSE, explained variance and top-1 ranking accuracy of every critic in SPEC (GenAC §6.3)."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s critic-eval %(levelname)s %(name)s: %(message)s")
    from rich.console import Console
    from rich.table import Table

    from lecritique.config.experiment import SpecError
    from lecritique.critic_eval import evaluate, load_critic_eval_spec
    from lecritique.critic_eval.report import table_rows

    try:
        parsed = load_critic_eval_spec(spec)
    except SpecError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(2) from None
    result, paths = evaluate(parsed, out, show_progress=progress)
    header, rows = table_rows(result)
    table = Table(title=f"critic-eval ({len(result.states)} states, M = {parsed.continuations})")
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    typer.echo(f"Monte-Carlo noise floor of the value MSE: {result.mc_noise_mse:.4f}")
    typer.echo(f"wrote {paths['json']}, {paths['markdown']} and {paths['plot']}")
