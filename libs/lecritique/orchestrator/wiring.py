"""An orchestrator from a spec and the addresses of running services (``lecritique orchestrate``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from lecritique.config.experiment import ExperimentSpec
from lecritique.engines.base import SamplingParams
from lecritique.episodes import EpisodePlayer
from lecritique.models.policy import load_tokenizer
from lecritique.models.templates import build_template
from lecritique.orchestrator.clients import ServiceClients
from lecritique.orchestrator.loop import OnStep, Orchestrator
from lecritique.orchestrator.redis_retry import retry_redis
from lecritique.redis_connection import connect_redis
from lecritique.replay import ReplayBuffer
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore


@dataclass(frozen=True)
class ServiceAddresses:
    """``host:port`` addresses of each service (a headless Service name resolves to every replica)."""

    rollout: Sequence[str]
    environment: Sequence[str]
    policy_trainer: Sequence[str]
    value_evaluator: Sequence[str] = ()
    value_trainer: Sequence[str] = ()


def build_orchestrator(
    spec: ExperimentSpec,
    out: Path,
    addresses: ServiceAddresses,
    *,
    experiment_id: str,
    weights_dir: Path | None = None,
    redis_url: str | None = None,
    on_step: OnStep | None = None,
) -> Orchestrator:
    """Connect to the services and the replay stream; the player uses the newest policy's tokenizer.

    Every metrics row goes to Redis (the REST API's series), then to ``on_step`` (the trackers)."""
    out.mkdir(parents=True, exist_ok=True)
    clients = ServiceClients.connect(
        rollout=addresses.rollout,
        environment=addresses.environment,
        policy_trainer=addresses.policy_trainer,
        value_evaluator=addresses.value_evaluator,
        value_trainer=addresses.value_trainer,
        deadline_seconds=spec.orchestrator.rpc_deadline_seconds,
        retry_seconds=spec.orchestrator.service_down_seconds,
    )
    redis_client = connect_redis(redis_url)
    store = WeightStore(weights_dir or out / "weights", experiment=experiment_id)
    _, policy_path = store.wait_latest("policy")
    return Orchestrator(
        spec,
        clients,
        _player(spec, clients, policy_path),
        out,
        experiment_id=experiment_id,
        replay=_replay(spec, redis_client, experiment_id),
        metrics_sink=_redis_sink(
            redis_client, experiment_id, on_step, spec.orchestrator.service_down_seconds
        ),
        pin_critic=(
            None
            if spec.critic is None
            else lambda version: store.pin("critic", version, holder="orchestrator")
        ),
    )


def _player(spec: ExperimentSpec, clients: ServiceClients, policy_path: Path) -> EpisodePlayer:
    tokenizer = load_tokenizer(policy_path)
    sampling = spec.rollout.sampling
    return EpisodePlayer(
        clients.rollout,
        clients.environment,
        tokenizer,
        build_template(spec.policy.template, tokenizer),
        SamplingParams(
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens
        ),
        max_context_tokens=int(clients.rollout.info()["max_sequence_tokens"]),
        # A safety cap one above the environment's own turn limit.
        max_turns=int(clients.environment.info().get("max_turns", 1)) + 1,
    )


def _replay(
    spec: ExperimentSpec, redis_client: redis.Redis, experiment_id: str
) -> ReplayBuffer[Trajectory] | None:
    if spec.critic is None:
        return None
    return ReplayBuffer(
        redis_client, experiment_id, **spec.critic.replay.model_dump(), decode=Trajectory.from_bytes
    )


def _redis_sink(
    redis_client: redis.Redis, experiment_id: str, then: OnStep | None, retry_seconds: float
) -> OnStep:
    metrics_key = f"lecritique:{experiment_id}:metrics"

    def write(row: dict[str, Any]) -> None:
        pipeline = redis_client.pipeline(transaction=True)
        pipeline.rpush(metrics_key, json.dumps(row))
        pipeline.hset(
            f"lecritique:{experiment_id}:status",
            mapping={"step": row["step"], "policy_version": row.get("policy_version", 0)},
        )
        pipeline.execute()

    def sink(row: dict[str, Any]) -> None:
        # The REST API reads the series from Redis; the file stays the source for reports.
        retry_redis(lambda: write(row), retry_seconds, "metrics row")
        if then is not None:
            then(row)

    return sink
