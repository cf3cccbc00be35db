"""``lecritique critic pretrain SPEC --out DIR``: value pretraining reused across runs (Le Critique §7.1)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from lecritique.pretrain import PretrainResult

critic_app = typer.Typer(help="Critic tools: offline pretraining.", no_args_is_help=True)


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
    result = _pretrained(spec, settings, out, cache_dir, progress, console)
    state = result.state
    console.print(
        f"held-out EV {state.history[0]['held_out_ev']:.4f} -> {state.best_ev:.4f} (epoch {state.best_epoch} of "
        f"{state.epoch}, stopped: {state.stopped}); wrote {out / 'summary.md'} and {out / 'ev.png'}"
    )
    console.print(f"use it: critic.model_path: {result.critic_dir.resolve()}", soft_wrap=True)


def _pretrained(
    spec: Path, settings: dict[str, Any], out: Path, cache_dir: Path | None, progress: bool, console: Console
) -> PretrainResult:
    """Load the spec, check its critic and the settings, then pretrain (exit 2 with the reason on a
    bad spec or setting, before anything is built)."""
    from lecritique.cli.tiny_policy import with_tiny_policy_built
    from lecritique.config import SpecError, load_spec
    from lecritique.pretrain import parse_pretrain_config, pretrain, pretrained_critic

    try:
        experiment = load_spec(spec)
        pretrained_critic(experiment)  # refuse other critic kinds before building anything
        config = parse_pretrain_config(settings)
        experiment = with_tiny_policy_built(experiment, cache_dir)
        return pretrain(experiment, config, out, show_progress=progress)
    except (SpecError, ValueError) as error:
        console.print(f"[red]{error}", soft_wrap=True)
        raise typer.Exit(2) from None
