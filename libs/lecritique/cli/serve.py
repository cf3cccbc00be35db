"""``lecritique serve SERVICE``: run one service process (what the services image runs, services/Dockerfile)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated

import typer

from lecritique.config.runtime import ServiceRuntime


class Service(StrEnum):
    rollout = "rollout"
    environment = "environment"
    value_evaluator = "value-evaluator"
    value_trainer = "value-trainer"
    policy_trainer = "policy-trainer"


SERVICE_ENTRY_POINTS = "lecritique.services"
"""Entry-point group of the services (``pyproject.toml``): each names a ``serve(runtime)`` function."""


def service_entry(service: Service) -> Callable[[ServiceRuntime], None]:
    """The ``serve`` function the installed ``lecritique.services`` entry point names."""
    found = entry_points(group=SERVICE_ENTRY_POINTS, name=service.value)
    if not found:
        raise typer.BadParameter(
            f"no {SERVICE_ENTRY_POINTS} entry point {service.value!r}: install the project (pip install -e .)"
        )
    serve_function: Callable[[ServiceRuntime], None] = next(iter(found)).load()
    return serve_function


def serve(
    service: Annotated[Service, typer.Argument(help="Which service to run.")],
    spec: Annotated[Path, typer.Option(help="Experiment spec (YAML or JSON).", exists=True, dir_okay=False)],
    port: Annotated[int, typer.Option(help="gRPC port (0: any free port, see --port-file).")] = 0,
    metrics_port: Annotated[
        int | None, typer.Option(help="Prometheus /metrics port (0: any free port).")
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="Experiment id (default: the spec's name).")] = None,
    weights_dir: Annotated[Path, typer.Option(help="Root of the weight store.")] = Path("weights"),
    redis_url: Annotated[str | None, typer.Option(envvar="REDIS_URL", help="Redis URL.")] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "0.0.0.0",
    state_dir: Annotated[Path | None, typer.Option(help="Service-local state directory.")] = None,
    port_file: Annotated[Path | None, typer.Option(help="Write the bound ports here as JSON.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Run one lecritique service until SIGTERM/SIGINT."""
    logging.basicConfig(
        level=log_level.upper(), format=f"%(asctime)s {service.value} %(levelname)s %(name)s: %(message)s"
    )
    from lecritique.config import load_spec

    experiment_id = experiment or load_spec(spec).name
    runtime = ServiceRuntime(
        port=port,
        spec_path=spec,
        experiment_id=experiment_id,
        weights_dir=weights_dir,
        redis_url=redis_url,
        metrics_port=metrics_port,
        host=host,
        state_dir=state_dir,
        port_file=port_file,
    )
    service_entry(service)(runtime)
