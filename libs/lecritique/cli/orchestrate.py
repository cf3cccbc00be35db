"""``lecritique orchestrate``: the experiment loop as its own process (a Job in Kubernetes)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from lecritique.config import ExperimentSpec
    from lecritique.orchestrator.loop import Orchestrator
    from lecritique.tracking import Trackers


logger = logging.getLogger("lecritique.orchestrator")

CANCELLED_EXIT_CODE = 143
"""Exit code after SIGTERM or SIGINT (128 + SIGTERM): cancelled, not failed."""


class Cancelled(Exception):
    """A stop signal arrived: the run is cancelled (its checkpoint keeps every completed step)."""


def _cancel_on_signal() -> None:
    """SIGTERM and SIGINT raise :class:`Cancelled` in the loop's thread, said in the log at once;
    later ones are ignored while the clients close."""

    def cancel(signum: int, _frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        name = signal.Signals(signum).name
        logger.warning("received %s: cancelling the run (a stop from the launcher, the API or a user)", name)
        raise Cancelled(name)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, cancel)


def _addresses(value: str | None) -> list[str]:
    return [a.strip() for a in (value or "").split(",") if a.strip()]


def orchestrate(
    spec: Annotated[
        Path, typer.Option(help="Resolved experiment spec (YAML or JSON).", exists=True, dir_okay=False)
    ],
    out: Annotated[Path, typer.Option(help="Run directory: metrics.jsonl, checkpoints.")],
    rollout: Annotated[str, typer.Option(help="Rollout addresses, comma-separated host:port.")],
    environment: Annotated[str, typer.Option(help="Environment-verifier addresses.")],
    policy_trainer: Annotated[str, typer.Option(help="Policy-trainer address.")],
    value_evaluator: Annotated[str | None, typer.Option(help="Value-evaluator addresses.")] = None,
    value_trainer: Annotated[str | None, typer.Option(help="Value-trainer address.")] = None,
    weights_dir: Annotated[
        Path | None, typer.Option(help="Weight store root (default: OUT/weights).")
    ] = None,
    redis_url: Annotated[
        str | None, typer.Option(envvar="REDIS_URL", help="Redis URL (replay, records).")
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="Experiment id (default: the spec's name).")] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Prometheus /metrics port (0: any free port).")
    ] = None,
    port_file: Annotated[Path | None, typer.Option(help="Write the bound metrics port here as JSON.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Run the policy loop of one experiment against running services; resumes from OUT's checkpoint."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s orchestrator %(levelname)s %(name)s: %(message)s"
    )
    from lecritique.config import load_spec
    from lecritique.orchestrator.wiring import ServiceAddresses, build_orchestrator
    from lecritique.tracking import open_trackers

    experiment_spec = load_spec(spec)
    if metrics_port is not None:
        _serve_metrics(metrics_port, port_file)
    addresses = ServiceAddresses(
        rollout=_addresses(rollout),
        environment=_addresses(environment),
        policy_trainer=_addresses(policy_trainer),
        value_evaluator=_addresses(value_evaluator),
        value_trainer=_addresses(value_trainer),
    )
    experiment_id = experiment or experiment_spec.name
    out.mkdir(parents=True, exist_ok=True)
    trackers = open_trackers(experiment_spec, out, experiment_id)
    orchestrator = build_orchestrator(
        experiment_spec,
        out,
        addresses,
        experiment_id=experiment_id,
        weights_dir=weights_dir,
        redis_url=redis_url,
        on_step=trackers.log_step,
    )
    completed = _run_cancellable(orchestrator, trackers, experiment_spec, out)
    typer.echo(f"orchestrator finished at step {completed}")


def _run_cancellable(orchestrator: Orchestrator, trackers: Trackers, spec: ExperimentSpec, out: Path) -> int:
    """:func:`_run_to_the_end`; a stop signal ends it with :data:`CANCELLED_EXIT_CODE`, said in the log."""
    _cancel_on_signal()
    try:
        return _run_to_the_end(orchestrator, trackers, spec, out)
    except Cancelled as stop:
        done = orchestrator.checkpoints.load().completed_step
        logger.warning(
            "orchestrator cancelled by %s after step %d of %d; every completed step is checkpointed: "
            "the same --out resumes the run",
            stop,
            done,
            spec.orchestrator.steps,
        )
        raise typer.Exit(CANCELLED_EXIT_CODE) from None


def _serve_metrics(port: int, port_file: Path | None) -> None:
    """Prometheus /metrics on ``port`` (0: any free one), the bound port written to ``port_file``."""
    from prometheus_client import start_http_server

    from lecritique.rpc.server import write_port_file

    metrics_server, _ = start_http_server(port)
    if port_file is not None:
        write_port_file(port_file, None, metrics_server.server_port)


def _run_to_the_end(orchestrator: Orchestrator, trackers: Trackers, spec: ExperimentSpec, out: Path) -> int:
    """Run the loop (the trackers log the report once every step is done), then close the trackers
    and the service clients whatever happened; returns the last completed step."""
    try:
        state = orchestrator.run()
        if state.completed_step >= spec.orchestrator.steps:
            trackers.log_report(out, spec.name)
    finally:
        trackers.close()
        orchestrator.clients.close()
    return state.completed_step
