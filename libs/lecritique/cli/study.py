"""``lecritique study STUDY.yaml --out DIR``: variants x seeds of one experiment, compared."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lecritique.cli.client_options import ApiOption
from lecritique.cli.spec_options import SetOption
from lecritique.launch.local.signals import terminate_as_interrupt


def study(
    spec: Annotated[
        Path,
        typer.Argument(help="Study spec (YAML): base spec, variants, seeds.", exists=True, dir_okay=False),
    ],
    out: Annotated[Path, typer.Option(help="Study folder (created; an existing one is resumed).")],
    quick: Annotated[
        bool, typer.Option("--quick", help="The spec's quick profile: 1 seed, few steps, 2 variants.")
    ] = False,
    api: ApiOption = None,
    ceiling: Annotated[
        bool, typer.Option(help="Probe the oracle ceiling on the critic variants' final checkpoints.")
    ] = True,
    report_only: Annotated[
        bool,
        typer.Option(
            "--report-only",
            help="Run no experiment: report the runs in --out (or its study.json alone); ceilings not yet probed are probed unless --no-ceiling.",
        ),
    ] = False,
    doc: Annotated[
        Path | None,
        typer.Option(
            help="Also put this study's tables into DOC's generated block, its data into DOC's .json, its figure beside it."
        ),
    ] = None,
    overrides: SetOption = None,
) -> None:
    """Run every (variant, seed) experiment, resumably, then write study.json, study.md, study.png.

    Locally each run is what ``lecritique run`` does; with ``--api`` the same specs are submitted
    to the REST API (the ceiling probe needs the checkpoints, so it runs only locally). ``--set``
    changes the base spec every variant starts from (a variant's own overrides still apply after it).
    """
    from rich.console import Console

    from lecritique.config import SpecError
    from lecritique.launch.local.launcher import SpecDrift
    from lecritique.study.run import run_study

    console = Console()

    try:
        with terminate_as_interrupt():
            run_study(
                spec,
                out,
                quick=quick,
                api=api,
                console=console,
                ceiling=ceiling,
                report_only=report_only,
                overrides=overrides or [],
            )
            if doc is not None:
                from lecritique.study.docs import publish

                written = publish(out, doc)
                console.print(f"published into {written['md']} ({written['json']}, {written['png']})")
    except (SpecError, SpecDrift) as error:
        console.print(f"[red]{error}")
        raise typer.Exit(2) from None
    except RuntimeError as error:
        console.print(f"[red]{error}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print(f"interrupted: every service of the run in progress stopped; run again to resume {out}")
        raise typer.Exit(130) from None
