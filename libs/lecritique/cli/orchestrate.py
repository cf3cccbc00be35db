"""``lecritique orchestrate``: the experiment loop as its own process (a Job in Kubernetes)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer


def _addresses(value: str | None) -> list[str]:
    return [a.strip() for a in (value or "").split(",") if a.strip()]


def orchestrate(
    spec: Annotated[Path, typer.Option(help="Resolved experiment spec (YAML or JSON).", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option(help="Run directory: metrics.jsonl, checkpoints.")],
    rollout: Annotated[str, typer.Option(help="Rollout addresses, comma-separated host:port.")],
    environment: Annotated[str, typer.Option(help="Environment-verifier addresses.")],
    policy_trainer: Annotated[str, typer.Option(help="Policy-trainer address.")],
    value_evaluator: Annotated[str | None, typer.Option(help="Value-evaluator addresses.")] = None,
    value_trainer: Annotated[str | None, typer.Option(help="Value-trainer address.")] = None,
    weights_dir: Annotated[Path | None, typer.Option(help="Weight store root (default: OUT/weights).")] = None,
    redis_url: Annotated[str | None, typer.Option(envvar="REDIS_URL", help="Redis URL (replay, records).")] = None,
    experiment: Annotated[str | None, typer.Option(help="Experiment id (default: the spec's name).")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus /metrics port (0: any free port).")] = None,
    port_file: Annotated[Path | None, typer.Option(help="Write the bound metrics port here as JSON.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Run the policy loop of one experiment against running services; resumes from OUT's checkpoint."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s orchestrator %(levelname)s %(name)s: %(message)s")
    from prometheus_client import start_http_server

    from lecritique.config import load_spec
    from lecritique.engines.base import SamplingParams
    from lecritique.episodes import EpisodePlayer
    from lecritique.models.policy import load_tokenizer
    from lecritique.models.templates import build_template
    from lecritique.orchestrator.clients import ServiceClients
    from lecritique.orchestrator.loop import Orchestrator
    from lecritique.replay import ReplayBuffer, connect_redis
    from lecritique.trajectory import Trajectory
    from lecritique.weights import WeightStore

    experiment_spec = load_spec(spec)
    experiment_id = experiment or experiment_spec.name
    out.mkdir(parents=True, exist_ok=True)
    if metrics_port is not None:
        metrics_server, _ = start_http_server(metrics_port)
        if port_file is not None:
            port_file.parent.mkdir(parents=True, exist_ok=True)
            temporary = port_file.with_name(port_file.name + ".tmp")
            temporary.write_text(json.dumps({"grpc": None, "metrics": metrics_server.server_port, "pid": os.getpid()}))
            temporary.replace(port_file)
    clients = ServiceClients.connect(
        rollout=_addresses(rollout),
        environment=_addresses(environment),
        policy_trainer=_addresses(policy_trainer),
        value_evaluator=_addresses(value_evaluator),
        value_trainer=_addresses(value_trainer),
    )
    redis = connect_redis(redis_url)
    store = WeightStore(weights_dir or out / "weights", experiment=experiment_id)
    _, policy_path = store.wait_latest("policy")
    tokenizer = load_tokenizer(policy_path)
    template = build_template(experiment_spec.policy.template, tokenizer)
    env_info = clients.environment.info()
    rollout_info = clients.rollout.info()
    sampling = experiment_spec.rollout.sampling
    player = EpisodePlayer(
        clients.rollout,
        clients.environment,
        tokenizer,
        template,
        SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens),
        max_context_tokens=int(rollout_info["max_sequence_tokens"]),
        max_turns=int(env_info.get("max_turns", 1)) + 1,
    )
    replay = None
    if experiment_spec.critic is not None:
        replay_spec = experiment_spec.critic.replay
        replay = ReplayBuffer(
            redis,
            experiment=experiment_id,
            capacity=replay_spec.capacity,
            max_reuse=replay_spec.max_reuse,
            max_age_versions=replay_spec.max_age_versions,
            decode=Trajectory.from_bytes,
        )
    metrics_key = f"lecritique:{experiment_id}:metrics"

    def sink(row: dict[str, Any]) -> None:
        # The REST API reads the series from Redis; the file stays the source for reports.
        redis.rpush(metrics_key, json.dumps(row))
        redis.hset(f"lecritique:{experiment_id}:status", mapping={"step": row["step"], "policy_version": row.get("policy_version", 0)})

    orchestrator = Orchestrator(
        experiment_spec, clients, player, out, experiment_id=experiment_id, replay=replay, metrics_sink=sink
    )
    try:
        state = orchestrator.run()
    finally:
        clients.close()
    typer.echo(f"orchestrator finished at step {state.completed_step}")
