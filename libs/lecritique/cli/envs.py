"""``lecritique envs audit SPEC``: can an answer that ignores the task earn a reward here?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

envs_app = typer.Typer(help="Environments: audit their scorers.", no_args_is_help=True)


def _environment_config(spec: Path) -> Any:
    """The environment of an experiment spec (it has an ``environment``) or of an environment spec (a ``kind``)."""
    from pydantic import TypeAdapter, ValidationError

    from lecritique.config import load_spec
    from lecritique.config.documents import SpecError, read_document
    from lecritique.envs import EnvironmentConfig

    try:
        data = read_document(spec, "spec")
    except SpecError as error:
        raise typer.BadParameter(str(error)) from None
    if not isinstance(data, dict):
        raise typer.BadParameter(f"{spec} holds no mapping")
    if "environment" in data:
        return load_spec(spec).environment
    if "kind" not in data:
        raise typer.BadParameter(
            f"{spec} is neither an experiment spec (environment:) nor an environment (kind:)"
        )
    try:
        return TypeAdapter(EnvironmentConfig).validate_python(
            data, context={"spec_dir": str(spec.parent.resolve())}
        )
    except ValidationError as error:
        raise typer.BadParameter(f"{spec}: {error}") from None


@envs_app.command("audit")
def audit(
    specs: Annotated[
        list[Path], typer.Argument(help="Experiment specs or environment specs (YAML/JSON).", exists=True)
    ],
    tasks: Annotated[int, typer.Option(help="Tasks per dataset (reasoning-gym) or for the environment.")] = 8,
    seed: Annotated[int, typer.Option(help="Sampling seed of the audited tasks.")] = 0,
    workers: Annotated[int, typer.Option(help="Scoring worker processes.")] = 2,
    answer_seconds: Annotated[float, typer.Option(help="Per-answer time limit (as the verifier's).")] = 10.0,
    job_seconds: Annotated[float, typer.Option(help="Time limit of one dataset's whole audit.")] = 600.0,
    every_dataset: Annotated[
        bool, typer.Option(help="A reasoning_gym spec: audit every registered dataset, not just its own.")
    ] = False,
    markdown: Annotated[
        bool, typer.Option(help="Print the table as Markdown (docs/security.md's form).")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the rows as JSON here.")] = None,
) -> None:
    """Score degenerate answers (empty, 0, 1, True, nan, the longest string, the commonest reference,
    task-ignoring ones such as 1*2*3*4) over many tasks; exit 1 when one wins (its mean reward is
    more than 0.25 above its share of the references), naming it."""
    from lecritique.envs import audit as scorer_audit
    from lecritique.envs.scoring_pool import ScoringLimits, ScoringPool

    configs = [_environment_config(spec) for spec in specs]
    if every_dataset:
        from lecritique.envs.reasoning_gym import registered_datasets

        every = {name: 1.0 for name in registered_datasets()}
        configs = [
            config.model_copy(update={"datasets": every}) if config.kind == "reasoning_gym" else config
            for config in configs
        ]
    pool = ScoringPool(ScoringLimits(workers=workers, answer_seconds=answer_seconds))
    try:
        rows = [
            row
            for config in configs
            for row in scorer_audit.audit_config(
                config, pool, per_group=tasks, seed=seed, seconds=job_seconds
            )
        ]
    finally:
        pool.close()
    if json_out is not None:
        json_out.write_text(json.dumps([row.as_dict() for row in rows], indent=2) + "\n")
    if markdown:
        typer.echo(scorer_audit.markdown(rows), nl=False)
    else:
        _print_table(rows, f"Scorer audit of {', '.join(map(str, specs))} ({tasks} tasks per group)")
    winners = [row for row in rows if row.wins]
    for row in winners:
        typer.echo(
            f"{row.group}: the answer {row.worst_answer[:60]!r} ignores the task and earns a mean reward of "
            f"{row.worst_mean:.2f} ({row.share:.2f} of the references are it)",
            err=True,
        )
    if winners:
        raise typer.Exit(1)


def _print_table(rows: list[Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from lecritique.envs.audit import shown

    table = Table(title=title)
    for column in ("dataset", "answers tried", "worst answer", "mean reward", "share", "action"):
        table.add_column(column)
    for row in rows:
        verdict = " (wins)" if row.wins else ""
        table.add_row(
            row.group,
            str(row.answers),
            shown(row.worst_answer).strip("`"),
            f"{row.worst_mean:.2f}{verdict}",
            f"{row.share:.2f}",
            row.action,
        )
    Console().print(table)
