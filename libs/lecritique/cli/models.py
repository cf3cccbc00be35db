"""``lecritique models ...``: tiny CPU models."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(name="models", help="Build and inspect models (tiny CPU policies).", no_args_is_help=True)


@app.command("build-tiny")
def build_tiny_command(
    task: Annotated[str, typer.Option(help="Tiny task name (see `lecritique models tasks`).")],
    out: Annotated[Path, typer.Option(help="Directory that receives the model (a copy of the cache entry).")],
    seed: Annotated[int, typer.Option(help="Seed of initialisation, data and evaluation.")] = 0,
    minutes: Annotated[
        float | None,
        typer.Option(
            help="Wall-clock limit on training (default: none); a build cut by it is refused, never cached."
        ),
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Step budget (default: the task's).")] = None,
    force: Annotated[bool, typer.Option(help="Replace OUT if it holds something else.")] = False,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Cache root (default: $LECRITIQUE_CACHE/tiny).")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="YAML/JSON file of further TinyBuildConfig fields (architecture, batch_size, ...)."
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Build a tiny Llama with a character tokenizer, warm-started on the task's demonstrations."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # OpenMP threads that spin while waiting lose badly on shared cores; read when torch loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from lecritique.tinybuild import TINY_TASKS, TinyBuildConfig, TinyBuildCut, build_tiny_model

    if task not in TINY_TASKS:
        raise typer.BadParameter(
            f"unknown tiny task {task!r}; known: {', '.join(sorted(TINY_TASKS))}", param_hint="--task"
        )
    from pydantic import ValidationError

    from lecritique.config.documents import SpecError, read_mapping

    try:
        settings = read_mapping(config, "TinyBuildConfig settings") if config is not None else {}
    except SpecError as error:
        raise typer.BadParameter(str(error), param_hint="--config") from None
    settings.update(task=task, seed=seed, max_minutes=minutes)
    if max_steps is not None:
        settings["max_steps"] = max_steps
    try:
        build_config = TinyBuildConfig.model_validate(settings)
    except ValidationError as error:
        raise typer.BadParameter(str(error), param_hint="--config") from None
    try:
        build = build_tiny_model(build_config, out=out, cache_dir=cache_dir, force=force)
    except TinyBuildCut as error:
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(2) from None
    evaluation = build.report["eval"]
    typer.echo(
        f"{build.path}: {build.report['parameters']} parameters, {build.report['steps']} steps "
        f"({build.report['stopped_because']}), held-out success sampled {evaluation['sampled_success']:.1%} "
        f"/ greedy {evaluation['greedy_success']:.1%} on {evaluation['tasks']} tasks"
        + (" [from cache]" if build.cached else "")
    )


@app.command("tasks")
def tasks_command() -> None:
    """List the tiny tasks and their environments."""
    from lecritique.tinybuild import TINY_TASKS

    for name, task in sorted(TINY_TASKS.items()):
        typer.echo(f"{name}: {task.environment} {json.dumps(task.environment_config)}")


DEFAULT_ROOT = Path("/weights")
"""Where the chart mounts the weight volume (the stage-model Job's ``--root``)."""


@app.command("stage")
def stage_command(
    source: Annotated[
        Path, typer.Argument(help="A Hugging Face model folder (config.json, weights, tokenizer).")
    ],
    tenant: Annotated[str, typer.Option(help="Tenant whose models folder receives it.")],
    root: Annotated[
        Path,
        typer.Option(
            help="The weight volume's mount point (the chart mounts it at /weights); for "
            "`lecritique api serve --dev` on this machine, its runs folder (runs)."
        ),
    ] = DEFAULT_ROOT,
    name: Annotated[
        str | None, typer.Option(help="Folder name under models/TENANT (default: SOURCE's).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace a model already staged under that name.")] = False,
) -> None:
    """Copy a model folder to ROOT/models/TENANT/NAME, checked (config.json, weight files, shards)
    and renamed into place at the end, so no pod loads a half-copied model; prints the path a
    spec's policy.path names."""
    from lecritique.models.staging import StagingError, stage_model
    from lecritique.tenancy.tokens import is_tenant_name

    if not is_tenant_name(tenant):
        raise typer.BadParameter(
            f"tenant name {tenant[:80]!r} must be 1-63 of a-z 0-9 _ . - (starting alphanumeric)",
            param_hint="--tenant",
        )
    if root == DEFAULT_ROOT and not root.is_dir():
        # The weight volume's mount point, absent: not a pod with the volume (a laptop, a CI machine).
        typer.secho(
            f"error: {root} does not exist here: it is where the chart mounts the weight volume. On this "
            f"machine, for `lecritique api serve --dev`, stage into its runs folder: --root runs (the "
            f"model lands in runs/models/{tenant}/); or give --root a folder of yours",
            fg="red",
            err=True,
        )
        raise typer.Exit(2)
    try:
        staged = stage_model(source, root, tenant, name, replace=force)
    except StagingError as error:
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"staged {staged.files} files ({staged.bytes / 1e6:.1f} MB) at {staged.path}")
    typer.echo(f"in a spec of tenant {tenant!r}: policy: {{path: {staged.path}}}")
