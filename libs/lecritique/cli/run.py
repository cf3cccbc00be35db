"""``lecritique run SPEC --out DIR``: a whole experiment as local processes, with progress."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lecritique.cli.spec_options import SetOption
from lecritique.launch.local.signals import signals_ignored, terminate_as_interrupt
from lecritique.run_folder import RunFolder

if TYPE_CHECKING:
    from lecritique.config import ExperimentSpec
    from lecritique.launch.local.launcher import LocalLauncher


ForceOption = Annotated[
    bool,
    typer.Option(
        "--force", help="Start again from scratch: delete OUT's contents first (a finished run too)."
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Keep Hugging Face's progress bars and load reports in the logs."),
]
PoolsOption = Annotated[
    bool,
    typer.Option(
        "--pools",
        help="Emulate two node pools: the policy path on the first half of this machine's cores, "
        "the value plane (value trainer, value evaluators, the embedded Redis) on the second.",
    ),
]
ExtendOption = Annotated[
    int | None,
    typer.Option(
        "--extend",
        metavar="STEPS",
        help="Continue the run in OUT for STEPS more policy steps: orchestrator.steps becomes the "
        "steps OUT's spec.json recorded plus STEPS (the only change to the recorded spec it allows; "
        "SPEC's own orchestrator.steps is replaced).",
    ),
]


def run(
    spec: Annotated[
        Path, typer.Argument(help="Experiment spec (YAML or JSON).", exists=True, dir_okay=False)
    ],
    out: Annotated[Path, typer.Option(help="Run directory (created; an existing one is resumed).")],
    redis_url: Annotated[
        str | None, typer.Option(envvar="REDIS_URL", help="Use this Redis instead of an embedded one.")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Cache of built tiny models.")] = None,
    experiment_id: Annotated[
        str | None,
        typer.Option(
            "--experiment", help="Experiment id (Redis keys, metric labels); default: the spec's name."
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="Logging level of this launcher.")] = "WARNING",
    force: ForceOption = False,
    verbose: VerboseOption = False,
    overrides: SetOption = None,
    extend: ExtendOption = None,
    pools: PoolsOption = False,
) -> None:
    """Start every service on loopback, run the experiment, stop everything, write the report.

    An existing OUT is resumed; one whose run already finished is left as it is (exit 0, no
    service started) unless --force, or --extend STEPS (that many more policy steps), asks for more.
    OUT's spec.json records what was trained: a spec that differs from it is refused with the
    changed fields (--force starts over; --extend changes only orchestrator.steps).
    SIGTERM and Ctrl-C stop the experiment cleanly; further signals are ignored until every
    service has stopped, so no process is left behind.
    """
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s run %(levelname)s %(name)s: %(message)s")
    from lecritique.launch.local.quiet import quiet_third_party

    quiet_third_party(verbose)
    from rich.console import Console

    # Messages are not wrapped inside their text (the terminal wraps; a log or the API's error field keeps them whole).
    console = Console(soft_wrap=True)
    experiment = _checked_spec(spec, overrides or [], console)
    if extend is not None:
        experiment = _extended(experiment, out, extend, console, force)
    if force and out.exists():
        import shutil

        console.print(f"--force: deleting {out} and starting again")
        shutil.rmtree(out)
    launcher = _launcher(experiment, out, cache_dir, redis_url, experiment_id, console, pools)
    _refuse_drift(out, launcher.spec, extend is not None, console)
    if _left_alone(out, experiment, console):
        return
    code, started = _run_services(launcher, experiment.orchestrator.steps, out, console)
    _report_and_exit(
        out,
        experiment.name,
        code,
        started,
        console,
        (launcher.completed_step(), experiment.orchestrator.steps),
    )


def _launcher(
    experiment: ExperimentSpec,
    out: Path,
    cache_dir: Path | None,
    redis_url: str | None,
    experiment_id: str | None,
    console: Any,
    pools: bool = False,
) -> LocalLauncher:
    """The local launcher of the experiment, its policy resolved (a tiny one built or taken from the cache)."""
    from lecritique.cli.tiny_policy import with_tiny_policy_built
    from lecritique.launch.local.launcher import LocalLauncher
    from lecritique.launch.local.pools import CorePools

    # A first build shows its own progress bar (a few minutes); the line says what happened.
    experiment = with_tiny_policy_built(experiment, cache_dir, say=console.print)
    core_pools = None
    if pools:
        try:
            core_pools = CorePools.halves()
        except ValueError as error:
            console.print(f"[red]--pools: {error}[/red]")
            raise typer.Exit(2) from error
        console.print(
            f"node pools emulated: policy path on cores {sorted(core_pools.policy)}, "
            f"value plane on cores {sorted(core_pools.value)}"
        )
    return LocalLauncher(
        experiment, out, redis_url=redis_url, experiment_id=experiment_id, core_pools=core_pools
    )


CANCELLED = 130
"""Exit code of a run stopped by SIGTERM or Ctrl-C (as ``lecritique study``'s)."""
ORCHESTRATOR_CANCELLED = 143
"""The orchestrator's exit code when it was stopped by a signal (128 + SIGTERM; ``lecritique orchestrate``)."""


def _run_services(launcher: LocalLauncher, steps: int, out: Path, console: Any) -> tuple[int, bool]:
    """Start every service, follow the run and stop everything, whatever happened (SIGTERM counts
    as Ctrl-C; later signals are ignored while stopping). Returns (the orchestrator's exit code, or
    :data:`CANCELLED` when this command was stopped, and whether every service started)."""
    code, started = 1, True
    with terminate_as_interrupt():
        try:
            _start(launcher, console)
            code = _follow(launcher, steps, console, resumed_at=launcher.completed_step())
        except KeyboardInterrupt:
            code = CANCELLED
            console.print("cancelled (SIGTERM or Ctrl-C): stopping every service")
        except (RuntimeError, TimeoutError) as error:
            # A service that exits or hangs while starting: its log's tail says why, not a traceback of the launcher.
            console.print(f"[red]{error}")
            console.print(f"every service's log: {out / 'logs'}")
            started = False
        finally:
            with signals_ignored():
                launcher.stop()
    return code, started


def _report_and_exit(
    out: Path, title: str, code: int, started: bool, console: Any, progress: tuple[int, int] = (0, 0)
) -> None:
    """Write the report of what the run recorded; exit with the orchestrator's code if it failed,
    with :data:`CANCELLED` if the run was cancelled (said as such, not as a bare exit code).
    ``progress``: (the last completed step, the spec's steps)."""
    from lecritique.reporting import write_report

    if RunFolder(out).metrics_path.exists():
        png, md = write_report(out, title=title)
        console.print(f"report: {md} and {png}")
    if code in (CANCELLED, ORCHESTRATOR_CANCELLED):
        done, steps = progress
        who = "" if code == CANCELLED else "the orchestrator was stopped by a signal: "
        console.print(
            f"[yellow]{who}cancelled after step {done} of {steps}; every completed step is checkpointed: "
            "the same command resumes the run"
        )
        raise typer.Exit(CANCELLED)
    if code != 0:
        if started:
            console.print(
                f"[red]orchestrator exited with code {code}; see {out / 'logs' / 'orchestrator.log'}"
            )
        raise typer.Exit(code or 1)


def _extended(
    experiment: ExperimentSpec, out: Path, extend: int, console: Any, force: bool = False
) -> ExperimentSpec:
    """The spec with ``orchestrator.steps`` = the steps OUT's run recorded + ``extend`` (exit 2,
    with the fix, when there is nothing to add to or nothing added, or --force would delete it)."""
    if force:
        console.print("[red]--extend continues the run in OUT and --force deletes it: give one of them")
        raise typer.Exit(2)

    if extend < 1:
        console.print(
            f"[red]--extend {extend}: the number of policy steps to add must be at least 1 "
            "(--extend 20 runs 20 more steps)"
        )
        raise typer.Exit(2)
    before = RunFolder(out).recorded_steps()
    if before is None:
        console.print(
            f"[red]--extend {extend}: {out} holds no run to extend (no spec.json); "
            "leave --extend out to start one there"
        )
        raise typer.Exit(2)
    orchestrator = experiment.orchestrator.model_copy(update={"steps": before + extend})
    return experiment.model_copy(update={"orchestrator": orchestrator})


def _refuse_drift(out: Path, resolved: ExperimentSpec, extend: bool, console: Any) -> None:
    """Exit 2 when OUT records a run of another spec (the changed fields named)."""
    from lecritique.launch.local.launcher import SpecDrift, check_recorded_spec
    from lecritique.tinybuild.identity import same_build

    try:
        extending = check_recorded_spec(out, resolved, extend=extend, same_model=same_build)
    except SpecDrift as error:
        console.print(f"[red]{error}")
        raise typer.Exit(2) from None
    if extending:
        console.print(extending)


def _left_alone(out: Path, experiment: ExperimentSpec, console: Any) -> bool:
    """When OUT holds a finished run, say so (the report is written if missing) and return True:
    nothing is to be started."""
    from lecritique.reporting import write_report

    folder = RunFolder(out)
    done = folder.finished_step(experiment.orchestrator.steps)
    if done is None:
        return False
    if not (out / "report.md").exists() and folder.metrics_path.exists():
        write_report(out, title=experiment.name)
    console.print(
        f"{out} already holds a finished run (step {done} of {experiment.orchestrator.steps}); nothing started. "
        f"report: {out / 'report.md'}. --force starts it again from scratch; --extend N continues it "
        "for N more policy steps."
    )
    return True


def _start(launcher: Any, console: Any) -> None:
    """Every service, then the orchestrator; a terminal shows the current stage in place, a log or
    a pipe gets one line per stage."""
    with console.status("starting services") as status:

        def stage(text: str) -> None:
            if console.is_terminal:
                status.update(text)
            else:
                console.print(text)

        launcher.start_services(on_stage=stage)
        stage("starting the orchestrator")
        launcher.start_orchestrator()


def _checked_spec(spec: Path, overrides: list[str], console: Any) -> ExperimentSpec:
    """The spec with its overrides, loaded and checked as far as this machine can (exit 2 with
    the reason if not)."""
    from lecritique.config import SpecError, load_spec
    from lecritique.tracking import check_tracker_packages

    try:
        experiment = load_spec(spec, overrides=overrides)
        if overrides:
            console.print(f"overrides: {', '.join(overrides)} (recorded in the run's spec.json)")
        check_tracker_packages(experiment.tracking)
        if experiment.environment.kind == "dataset":
            # Read and check every row now: a bad row is reported here, not in a service's log.
            from lecritique.envs import build_environment

            build_environment(experiment.environment)
    except (SpecError, ImportError, ValueError) as error:
        console.print(f"[red]{error}")
        raise typer.Exit(2) from None
    from lecritique.config.findings import warning_texts

    for warning in warning_texts(experiment):
        console.print(f"[yellow]warning: {warning}")
    return experiment


def _follow(launcher: Any, steps: int, console: Any, resumed_at: int = 0) -> int:
    """Show the policy steps as they finish; returns the orchestrator's exit code."""
    if not console.is_terminal:
        return _follow_plain(launcher, steps, console, resumed_at)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[summary]}"),
    )
    with Progress(*columns, console=console) as progress:
        first = "warming up the critic" if resumed_at == 0 else f"resuming after step {resumed_at}"
        task = progress.add_task("policy steps", total=steps, completed=resumed_at, summary=first)

        def on_metrics(row: dict[str, Any]) -> None:
            def fmt(key: str) -> str:
                value = row.get(key)
                return (
                    "-"
                    if value is None or (isinstance(value, float) and math.isnan(value))
                    else f"{value:.3f}"
                )

            if row["step"] == 0:
                progress.update(task, summary=f"initial policy: held-out success {fmt('eval_success')}")
                return
            progress.update(
                task,
                completed=row["step"],
                summary=f"reward {fmt('reward_mean')}  EV {fmt('value_explained_variance')}  rho {fmt('tether_rho')}",
            )

        code: int = launcher.wait(on_metrics)
    return code


def _fmt(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _follow_plain(launcher: Any, steps: int, console: Any, resumed_at: int) -> int:
    """Outside a terminal (a log, a pipe, the API's local launcher): one line per policy step."""
    console.print(
        "warming up the critic, then the policy steps"
        if resumed_at == 0
        else f"resuming after step {resumed_at}"
    )

    def on_metrics(row: dict[str, Any]) -> None:
        if row["step"] == 0:
            console.print(f"step 0: initial policy, held-out success {_fmt(row, 'eval_success')}")
            return
        console.print(
            f"step {row['step']}/{steps}  reward {_fmt(row, 'reward_mean')}  EV {_fmt(row, 'value_explained_variance')}"
            f"  rho {_fmt(row, 'tether_rho')}"
        )

    code: int = launcher.wait(on_metrics)
    return code
