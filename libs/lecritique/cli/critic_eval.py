"""``lecritique critic-eval SPEC --out DIR`` (or ``--run RUN_DIR``, writing into RUN_DIR/critic-eval
unless ``--out`` says otherwise): compare critics, and two critic-free baselines, against
Monte-Carlo values of a fixed policy."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from lecritique.cli.spec_options import SetOption


def critic_eval(
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
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output directory: critic_eval.json, .md, .png (with --run: RUN_DIR/critic-eval by default)."
        ),
    ] = None,
    overrides: SetOption = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Value MSE, ev_var, pairwise ranking accuracy (ties handled) and the oracle ceiling of every critic (GenAC §6.3)."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s critic-eval %(levelname)s %(name)s: %(message)s"
    )
    from lecritique.config.experiment import SpecError
    from lecritique.critic_eval import evaluate

    try:
        parsed = _spec(spec, run, {"tasks": tasks, "states": states, "continuations": continuations})
        if overrides:
            parsed = _overridden(parsed, overrides)
        out = _out(out, run)
    except SpecError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(2) from None
    result, paths = evaluate(parsed, out, show_progress=progress)
    _print(result, parsed.continuations)
    typer.echo(f"wrote {paths['json']}, {paths['markdown']} and {paths['plot']}")


def _print(result: Any, continuations: int) -> None:
    """The tables (split by columns to fit the terminal), the tie note and the verdicts."""
    from rich.console import Console

    from lecritique.critic_eval.report import ceiling_verdict, console_tables, tie_note, verdict

    console = Console(soft_wrap=False)
    for table in console_tables(result, f"critic-eval ({len(result.states)} states, M = {continuations})"):
        console.print(table)
    console.print(tie_note(result))
    typer.echo(verdict(result))
    if result.ceiling:
        typer.echo(ceiling_verdict(result))
    typer.echo(f"Monte-Carlo noise floor of the value MSE: {result.mc_noise_mse:.4f}")


def _out(out: Path | None, run: Path | None) -> Path:
    """Where the report goes: ``--out``, else inside the run folder."""
    from lecritique.config.experiment import SpecError

    if out is not None:
        return out
    if run is None:
        raise SpecError(
            "--out DIR is required with a critic-eval spec (with --run it defaults to RUN_DIR/critic-eval)"
        )
    return run / "critic-eval"


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
