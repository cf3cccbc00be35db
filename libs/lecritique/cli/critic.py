"""``lecritique critic pretrain SPEC --out DIR``: value pretraining reused across runs (Le Critique §7.1)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lecritique.cli.spec_options import SetOption

if TYPE_CHECKING:
    from rich.console import Console

    from lecritique.pretrain import PretrainResult

critic_app = typer.Typer(help="Critic tools: offline pretraining, the settings sweep.", no_args_is_help=True)


@critic_app.command()
def pretrain(
    spec: Annotated[
        Path,
        typer.Argument(
            help="Experiment spec (YAML or JSON) whose critic is pretrained.", exists=True, dir_okay=False
        ),
    ],
    out: Annotated[Path, typer.Option(help="Output directory (created; an existing one is resumed).")],
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", help="Another policy to play (repeatable): a checkpoint of an earlier run."),
    ] = None,
    spec_policy: Annotated[bool, typer.Option(help="Whether the spec's own policy plays too.")] = True,
    tasks_per_policy: Annotated[
        int, typer.Option(help="Tasks each policy plays (rollout.group_size episodes each).")
    ] = 256,
    held_out_fraction: Annotated[
        float, typer.Option(help="Share of tasks held out for the EV plateau.")
    ] = 0.2,
    max_epochs: Annotated[int, typer.Option(help="Epochs at most.")] = 50,
    patience: Annotated[int, typer.Option(help="Epochs without held-out EV gain before stopping.")] = 3,
    min_delta: Annotated[float, typer.Option(help="Held-out EV gain that counts as progress.")] = 0.005,
    batch_size: Annotated[
        int | None, typer.Option(help="Trajectories per update (default: the spec's critic batch size).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default: the spec's).")] = None,
    overrides: SetOption = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Cache of built tiny models.")] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "WARNING",
) -> None:
    """Play the spec's policy (and --policy checkpoints) with the critic's own privileged contexts,
    train the spec's discriminative critic on the returns to a held-out EV plateau, and save it as
    OUT/critic: name it as critic.model_path in a later run."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s pretrain %(levelname)s %(name)s: %(message)s"
    )
    from rich.console import Console

    console = Console(soft_wrap=True)  # messages whole: the terminal wraps, a log keeps them on one line
    settings = {
        "policies": policy or [],
        "include_spec_policy": spec_policy,
        "tasks_per_policy": tasks_per_policy,
        "held_out_fraction": held_out_fraction,
        "max_epochs": max_epochs,
        "patience": patience,
        "min_delta": min_delta,
        "batch_size": batch_size,
        "seed": seed,
    }
    result = _pretrained(spec, overrides or [], settings, out, (cache_dir, progress), console)
    state = result.state
    console.print(
        f"held-out EV {state.history[0]['held_out_ev']:.4f} -> {state.best_ev:.4f} (epoch {state.best_epoch} of "
        f"{state.epoch}, stopped: {state.stopped}); wrote {out / 'summary.md'} and {out / 'ev.png'}"
    )
    console.print(f"use it: critic.model_path: {result.critic_dir.resolve()}", soft_wrap=True)


def _pretrained(
    spec: Path,
    overrides: list[str],
    settings: dict[str, Any],
    out: Path,
    build: tuple[Path | None, bool],
    console: Console,
) -> PretrainResult:
    """Load the spec (``--set`` applied), check its critic and the settings, then pretrain (exit 2
    with the reason on a bad spec or setting, before anything is built). ``build``: the tiny-model
    cache and whether progress bars show."""
    cache_dir, progress = build
    from lecritique.cli.tiny_policy import with_tiny_policy_built
    from lecritique.config import SpecError, load_spec
    from lecritique.pretrain import parse_pretrain_config, pretrain, pretrained_critic

    try:
        experiment = load_spec(spec, overrides)
        pretrained_critic(experiment)  # refuse other critic kinds before building anything
        config = parse_pretrain_config(settings)
        experiment = with_tiny_policy_built(experiment, cache_dir)
        return pretrain(experiment, config, out, show_progress=progress)
    except (SpecError, ValueError) as error:
        console.print(f"[red]{error}", soft_wrap=True)
        raise typer.Exit(2) from None


def _grid(values: list[str]) -> dict[str, list[Any]]:
    """``--grid PATH=V1,V2,...`` options as a grid (values read as YAML scalars: 1e-4, bce, true)."""
    import yaml

    from lecritique.config import SpecError

    grid: dict[str, list[Any]] = {}
    for item in values:
        path, sep, listed = item.partition("=")
        if not sep or not path.strip() or not listed.strip():
            raise SpecError(f"--grid {item!r}: expected PATH=V1,V2,... (e.g. optimizer.lr=1e-4,3e-4)")
        path = path.strip().removeprefix("critic.")
        grid[path] = [_scalar(yaml.safe_load(value.strip())) for value in listed.split(",")]
    return grid


def _scalar(value: Any) -> Any:
    # YAML reads 1e-4 as a string (it wants 1.0e-4): a number-like string is a number here.
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


SweepSpecArgument = Annotated[
    Path,
    typer.Argument(
        help="Experiment spec, or a study file with --variant: the arm whose critic is swept.",
        exists=True,
        dir_okay=False,
    ),
]
SweepOut = Annotated[Path, typer.Option(help="Output directory (created; an existing one is resumed).")]
SweepUpdates = Annotated[
    int,
    typer.Option(
        help="The run's budget: critic updates an arm's critic makes (metrics' critic_updates_done)."
    ),
]
SweepVariant = Annotated[
    str | None, typer.Option(help="With a study file: the variant whose critic is swept.")
]
SweepPolicySeed = Annotated[
    int, typer.Option(help="With a study file: the seed of the tiny build (starting policy) it plays.")
]
SweepGrid = Annotated[
    list[str] | None,
    typer.Option(
        "--grid",
        metavar="PATH=V1,V2,...",
        help="A critic field and its values (repeatable; default: optimizer.lr 1e-5..3e-3 x head_init x loss).",
    ),
]
SweepUpdatesPerPush = Annotated[
    float | None,
    typer.Option(help="The run's critic updates per policy step (default: rows enter only when needed)."),
]
SweepReportOnly = Annotated[
    bool, typer.Option(help="Train nothing: the table of the settings OUT has finished.")
]
SweepDoc = Annotated[
    Path | None,
    typer.Option(help="Write the table into this document's generated block (and the JSON beside it)."),
]


@critic_app.command()
def sweep(
    spec: SweepSpecArgument,
    out: SweepOut,
    updates: SweepUpdates,
    variant: SweepVariant = None,
    policy_seed: SweepPolicySeed = 0,
    grid: SweepGrid = None,
    overrides: SetOption = None,
    long_updates: Annotated[int | None, typer.Option(help="A longer budget measured beside it.")] = None,
    eval_every: Annotated[int | None, typer.Option(help="Updates between held-out evaluations.")] = None,
    updates_per_push: SweepUpdatesPerPush = None,
    tasks_per_policy: Annotated[int | None, typer.Option(help="Tasks played (default: enough rows).")] = None,
    held_out_fraction: Annotated[float, typer.Option(help="Share of tasks held out for the EV.")] = 0.2,
    seeds: Annotated[str, typer.Option(help="Seeds of split, head and order, comma-separated.")] = "0",
    report_only: SweepReportOnly = False,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads (default: torch's).")] = None,
    doc: SweepDoc = None,
    name: Annotated[
        str | None, typer.Option(help="The block's name in --doc (default: the spec's name).")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Cache of built tiny models.")] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "WARNING",
) -> None:
    """Train the spec critic's settings (a grid: learning rate x head init x loss by default) for a run's
    update budget on the policy's own episodes, fed by the replay's rules, and rank them by held-out EV
    (OUT/sweep.json, OUT/sweep.md; --doc writes the table into a document's generated block)."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s sweep %(levelname)s %(name)s: %(message)s"
    )
    from rich.console import Console

    from lecritique.config import SpecError

    console = Console(soft_wrap=True)
    settings: dict[str, Any] = {
        "updates": updates,
        "long_updates": long_updates,
        "eval_every": eval_every,
        "updates_per_push": updates_per_push,
        "tasks_per_policy": tasks_per_policy,
        "held_out_fraction": held_out_fraction,
        "seeds": [int(s) for s in seeds.split(",") if s.strip()],
    }
    try:
        experiment = _swept_spec(spec, variant, policy_seed, overrides or [], cache_dir)
        if grid:
            settings["grid"] = _grid(grid)
        document = _run_sweep(experiment, settings, out, threads, progress, report_only)
    except (SpecError, ValueError) as error:
        console.print(f"[red]{error}", soft_wrap=True)
        raise typer.Exit(2) from None
    _write_sweep(console, document, out, doc, name or experiment.name)


def _run_sweep(
    experiment: Any,
    settings: dict[str, Any],
    out: Path,
    threads: int | None,
    progress: bool,
    report_only: bool,
) -> dict[str, Any]:
    """The sweep document of ``settings`` (``SweepConfig``'s fields) on ``experiment``'s critic."""
    from rich.progress import Progress

    from lecritique.pretrain.sweep import parse_sweep_config, run_sweep

    config = parse_sweep_config(settings)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    with Progress(disable=not progress) as bars:
        return run_sweep(experiment, config, out, progress=bars, train=not report_only)


def _write_sweep(console: Console, document: dict[str, Any], out: Path, doc: Path | None, name: str) -> None:
    """OUT/sweep.json and sweep.md, the table printed, and the generated block in ``doc``."""
    import json

    from lecritique.pretrain.sweep_report import publish, render

    (out / "sweep.json").write_text(json.dumps(document, indent=1) + "\n")
    table = render(document)
    (out / "sweep.md").write_text(table)
    console.print(table, markup=False)
    if doc is not None:
        publish(document, doc, name)
        console.print(f"wrote the block {name!r} into {doc}", soft_wrap=True)


def _swept_spec(
    spec: Path, variant: str | None, policy_seed: int, overrides: list[str], cache_dir: Path | None
) -> Any:
    """The experiment spec whose critic is swept, its tiny policy built: the file itself, or a study's
    variant as its runs start it (base + overrides, the tiny build of ``policy_seed``)."""
    from lecritique.cli.tiny_policy import with_tiny_policy_built
    from lecritique.config import SpecError, load_spec, parse_spec
    from lecritique.config.experiment import ExperimentSpec
    from lecritique.config.overrides import OverrideError, apply_overrides
    from lecritique.pretrain import pretrained_critic

    if variant is None:
        experiment = load_spec(spec, overrides)
    else:
        from lecritique.config.documents import merge_documents
        from lecritique.study.config import base_document, load_study_spec

        study = load_study_spec(spec)
        chosen = next((v for v in study.variants if v.name == variant), None)
        if chosen is None:
            names = ", ".join(v.name for v in study.variants)
            raise SpecError(f"--variant: {study.name} has no variant {variant!r} (it has {names})")
        document, spec_dir = base_document(study, spec.parent)
        document = merge_documents(document, chosen.overrides)
        document.update(name=f"{study.name}-{variant}-sweep", seed=policy_seed)
        try:
            document = apply_overrides(document, overrides, ExperimentSpec)
        except OverrideError as error:
            raise SpecError(str(error)) from None
        experiment = parse_spec(document, spec_dir=spec_dir)
    pretrained_critic(experiment)
    return with_tiny_policy_built(experiment, cache_dir)
