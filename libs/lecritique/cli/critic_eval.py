"""``lecritique critic-eval SPEC --out DIR`` (or ``--run RUN_DIR``): compare critics against Monte-Carlo values of a fixed policy."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from lecritique.cli.spec_options import SetOption


def critic_eval(
    out: Annotated[Path, typer.Option(help="Output directory: critic_eval.json, .md, .png.")],
    spec: Annotated[
        Path | None,
        typer.Argument(
            help="critic-eval spec (YAML): policy, environment, critics. Not an experiment spec: use --run.",
            dir_okay=False,
        ),
    ] = None,
    run: Annotated[
        Path | None,
        typer.Option(
            "--run",
            help="A run folder (`lecritique run --out`): its spec.json, newest policy and critic.",
            file_okay=False,
        ),
    ] = None,
    tasks: Annotated[
        int | None, typer.Option(help="With --run: held-out tasks the states come from.")
    ] = None,
    states: Annotated[int | None, typer.Option(help="With --run: states measured.")] = None,
    continuations: Annotated[
        int | None, typer.Option(help="With --run: Monte-Carlo continuations per state.")
    ] = None,
    overrides: SetOption = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Value MSE, ev_var, top-1 ranking accuracy and the oracle ceiling of every critic (GenAC §6.3)."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s critic-eval %(levelname)s %(name)s: %(message)s"
    )
    from rich.console import Console
    from rich.table import Table

    from lecritique.config.experiment import SpecError
    from lecritique.critic_eval import evaluate
    from lecritique.critic_eval.report import ceiling_verdict, table_rows, verdict

    try:
        parsed = _spec(spec, run, {"tasks": tasks, "states": states, "continuations": continuations})
        if overrides:
            parsed = _overridden(parsed, overrides)
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
    typer.echo(verdict(result))
    if result.ceiling:
        typer.echo(ceiling_verdict(result))
    typer.echo(f"Monte-Carlo noise floor of the value MSE: {result.mc_noise_mse:.4f}")
    typer.echo(f"wrote {paths['json']}, {paths['markdown']} and {paths['plot']}")


def _spec(spec: Path | None, run: Path | None, settings: dict[str, Any]) -> Any:
    from lecritique.config.experiment import SpecError
    from lecritique.critic_eval import load_critic_eval_spec
    from lecritique.critic_eval.from_run import spec_from_run

    if (spec is None) == (run is None):
        raise SpecError(
            "name either a critic-eval spec (SPEC) or a run folder (--run RUN_DIR), not both and not neither"
        )
    if run is not None:
        return spec_from_run(run, **{key: value for key, value in settings.items() if value is not None})
    assert spec is not None
    given = [f"--{key}" for key, value in settings.items() if value is not None]
    if given:
        raise SpecError(f"{', '.join(given)} go with --run; with a spec file, set them in it")
    return load_critic_eval_spec(spec)


def _overridden(parsed: Any, overrides: list[str]) -> Any:
    """The critic-eval spec with ``--set`` overrides applied, validated again."""
    from pydantic import ValidationError

    from lecritique.config.experiment import SpecError
    from lecritique.config.overrides import OverrideError, apply_overrides

    model = type(parsed)
    try:
        return model.model_validate(apply_overrides(parsed.model_dump(mode="json"), overrides, model))
    except OverrideError as error:
        raise SpecError(str(error)) from None
    except ValidationError as error:
        raise SpecError(f"after --set {', '.join(overrides)}: {error}") from None
