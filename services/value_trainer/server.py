"""value-trainer: trains the critic from the replay stream and publishes versioned weights.

Independent of the policy loop (Le Critique Appendix B): it samples the experiment's replay
buffer (FIFO, reuse <= N, age <= A, enforced atomically in Redis so several replicas may share
one stream), takes one optimiser step per batch, and publishes each new version to the weight
store for the value evaluator to hot-swap. Targets are Monte-Carlo returns, or GAE lambda-returns
when the experiment sets ``lambda_target < 1`` (or ``auto``).

Critic kinds: ``discriminative`` regresses its scalar head (:class:`CriticTrainer`);
``generative`` is trained by REINFORCE on GenAC's reward 1 - (r - v)^2
(:class:`GenerativeCriticTrainer`); ``frozen_llm`` has nothing to train, so the service idles
(it answers Status with zero updates) and consumes no replay.

A discriminative critic may train in ``critic.processes`` data-parallel ranks under ``torchrun``
(``parallelism: ddp | fsdp2``; gloo on CPU, NCCL on GPU), like the policy trainer: rank 0 alone
connects to Redis, samples the replay stream and broadcasts each batch
(:func:`~lecritique.training.distributed.follow_batches`, with a heartbeat while the stream is
dry); every rank computes the batch's targets (a pure function of it) and takes the step; every
rank takes part in publishing (rank 0 writes; under FSDP2 the others help gather the shards).
Rank 0 serves gRPC. A step that fails on any rank ends every rank (the others may be inside a
collective); the restarted group resumes from the newest published version.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from prometheus_client import Counter, Gauge

from lecritique.advantages.targets import critic_targets
from lecritique.config import ExperimentSpec, load_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.critics.kinds import CriticLearner, TrainerFactory, critic_kind
from lecritique.critics.specs import CriticSpec, TrainedCriticSpec
from lecritique.redis_connection import connect_redis
from lecritique.replay import ReplayBuffer
from lecritique.rpc.server import StartedService, start_rank_health, start_server
from lecritique.training.checkpoint import TrainerCheckpoints
from lecritique.training.config import TrainerProcessesConfig
from lecritique.training.distributed import (
    HEARTBEAT_SECONDS,
    IDLE,
    DistributedContext,
    Idle,
    broadcast_object,
    current_context,
    follow_batches,
    init_distributed_from_env,
    leave_sigterm_to_rank_zero,
)
from lecritique.training.engine import HFTrainer
from lecritique.training.weight_sync import WeightSync, publish_dtype
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2, value_pb2, value_pb2_grpc
from lecritique.weights import WeightStore

logger = logging.getLogger(__name__)

UPDATES = Counter("lecritique_value_updates_total", "Critic optimiser steps", ["experiment"])
LOSS = Gauge("lecritique_value_loss", "Critic loss of the last update", ["experiment"])
TRAIN_EV = Gauge(
    "lecritique_value_train_explained_variance",
    "Explained variance of the last critic batch (pre-update)",
    ["experiment"],
)
PUBLISHED = Gauge("lecritique_value_published_version", "Newest published critic version", ["experiment"])


class ValueTrainerService(value_pb2_grpc.ValueTrainerServicer):
    """The critic's training loop and its gRPC answers, over parts :func:`build_value_trainer`
    made (the Redis connection, the learner with its first published version, the weight sync):
    constructing one connects, publishes and starts nothing."""

    def __init__(
        self,
        spec: ExperimentSpec,
        critic: CriticSpec,
        experiment: str,
        context: DistributedContext,
        store: WeightStore,
        learned: tuple[CriticLearner | None, int],
        replay: ReplayBuffer[Trajectory] | None,
        checkpoints: TrainerCheckpoints | None = None,
        sync: WeightSync | None = None,
    ) -> None:
        self.spec = spec
        self.critic = critic
        self.kind = critic_kind(critic)
        self.experiment = experiment
        self.context = context
        self.store = store
        self.trainer, self.version = learned
        self.replay = replay
        self.checkpoints = checkpoints
        self.sync = sync
        # A critic that is never trained has no batches; its Status still reports the replay depth.
        self.batch_size = spec.critic_batch_size
        # ``lambda_target: auto`` resolves to 0.4^(1/L) (Le Critique §7.2): logged, as it is a number only here.
        self.lambda_target = spec.estimator.critic_target_lambda()
        self.updates = 0
        self.last: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._train_loop, name="critic-training", daemon=True)

    def _publish(self, trainer: CriticLearner, critic: TrainedCriticSpec) -> int:
        """The next version (every rank calls it; the others get the version they had)."""
        if self.sync is not None:
            version = self.sync.publish()
            return self.version if version is None else version
        return self.store.publish("critic", trainer.save, keep_last=critic.keep_versions)

    def start(self) -> None:
        """Rank 0: train in a thread next to the gRPC server."""
        if self.trainer is not None:
            self._thread.start()

    def follow(self) -> None:
        """The other ranks: train on rank 0's batches until it stops."""
        if self.trainer is not None:
            follow_batches(lambda: None, self._train)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        if self.sync is not None:
            self.sync.close()

    def _policy_version(self) -> int | None:
        """The newest policy version: announced in Redis (broadcast versions are not all on the volume) or stored."""
        known = [
            v
            for v in (self.store.announced("policy"), (self.store.latest("policy") or (None,))[0])
            if v is not None
        ]
        return max(known) if known else None

    def _train_loop(self) -> None:
        try:
            follow_batches(self._next_batch, self._train)
        except Exception:
            # A broadcast failed (another rank died): a server whose training has stopped must not
            # go on answering Status, so the whole group ends and is restarted.
            logger.exception("critic training stopped")
            os._exit(1)

    def _next_batch(self) -> list[Trajectory] | Idle | None:
        """Rank 0: a full batch from the replay stream; IDLE after a heartbeat's wait; None once stopping."""
        assert self.replay is not None, "rank 0 holds the replay stream"
        deadline = time.monotonic() + HEARTBEAT_SECONDS
        while not self._stop.is_set():
            try:
                # Le Critique trains on full rollout-sized batches: wait for enough fresh data.
                if len(self.replay) >= self.batch_size:
                    entries = self.replay.sample(
                        self.batch_size, current_policy_version=self._policy_version()
                    )
                    if len(entries) >= self.batch_size:
                        return [entry.payload for entry in entries]
            except Exception:
                logger.exception("sampling the replay stream failed; retrying")
                self._stop.wait(1.0)
            if time.monotonic() >= deadline:
                return IDLE
            self._stop.wait(0.1)
        return None

    def _train(self, trajectories: list[Trajectory]) -> None:
        """Every rank: one update on the batch, then a publish when one is due."""
        trainer, critic = self.trainer, self.critic
        assert trainer is not None and isinstance(critic, TrainedCriticSpec), "started only for trained kinds"
        try:
            metrics = trainer.train_step(trajectories, critic_targets(trajectories, self.lambda_target))
            version = self.version
            if (self.updates + 1) % critic.publish_every == 0:
                version = self._publish(trainer, critic)
            if self.checkpoints is not None and isinstance(trainer, HFTrainer):
                # meta.json takes rank 0's extra, and rank 0 knows the version: no collective needed.
                self.checkpoints.save_if_due(trainer, extra={"version": version})
        except Exception:
            if self.context.enabled:
                logger.exception("critic update failed on rank %d; stopping every rank", self.context.rank)
                os._exit(1)
            logger.exception("critic update failed; retrying")
            self._stop.wait(1.0)
            return
        with self._lock:
            self.updates += 1
            self.version = version
            self.last = metrics
        UPDATES.labels(self.experiment).inc()
        LOSS.labels(self.experiment).set(metrics["loss"])
        if np.isfinite(metrics.get("explained_variance", float("nan"))):
            TRAIN_EV.labels(self.experiment).set(metrics["explained_variance"])
        PUBLISHED.labels(self.experiment).set(version)
        if self.context.is_main:
            logger.info(
                "critic update %d -> version %d (loss %.4f, explained variance %.4f)",
                self.updates,
                version,
                metrics["loss"],
                metrics.get("explained_variance", float("nan")),
            )

    def _status(self) -> value_pb2.ValueTrainerStatus:
        with self._lock:
            last = dict(self.last)
            return value_pb2.ValueTrainerStatus(
                updates=self.updates,
                published_version=self.version,
                last_loss=last.get("loss", float("nan")),
                last_explained_variance=last.get("explained_variance", float("nan")),
                replay_depth=0 if self.replay is None else len(self.replay),
                metrics={k: float(v) for k, v in last.items()},
            )

    def Status(self, request, context):
        return self._status()

    def Info(self, request, context):
        return common_pb2.ServiceInfo(
            service="value-trainer",
            experiment=self.experiment,
            weights_version=self.version,
            details_json=json.dumps(
                {
                    "batch_size": self.batch_size,
                    "critic_kind": self.kind.name,
                    "loss": None if self.kind.trainer is None else self.kind.trainer.loss(self.critic),
                    "processes": self.context.world_size,
                }
            ),
        )


def build_value_trainer(
    spec: ExperimentSpec,
    critic: CriticSpec,
    runtime: ServiceRuntime,
    context: DistributedContext | None = None,
) -> ValueTrainerService:
    """Connect to Redis (rank 0), start the learner from the newest critic or publish a fresh one
    as version 0, and set up how versions reach the evaluators (a broadcast or the store)."""
    context = context or current_context()
    kind = critic_kind(critic)
    checkpoints = _checkpoints(critic, runtime)
    redis = connect_redis(runtime.redis_url) if context.is_main else None
    store = WeightStore(runtime.weights_dir, redis=redis, experiment=runtime.experiment_id)
    learned: tuple[CriticLearner | None, int] = (None, 0)
    if kind.trainer is None:
        logger.info("the %s critic is never trained: value trainer idle", kind.name)
    else:
        learned = _start_learner(kind.trainer, spec, critic, store, context, checkpoints)
    replay = (
        None
        if redis is None
        else ReplayBuffer(
            redis, runtime.experiment_id, **critic.replay.model_dump(), decode=Trajectory.from_bytes
        )
    )
    sync = None
    if isinstance(learned[0], HFTrainer) and isinstance(critic, TrainerProcessesConfig):
        sync = WeightSync(
            learned[0],
            store,
            "critic",
            critic.weight_transport,
            receivers=critic.evaluator_replicas,
            keep_last=critic.keep_versions,
            dtype=publish_dtype(critic.publish_dtype),
        )
    service = ValueTrainerService(
        spec, critic, runtime.experiment_id, context, store, learned, replay, checkpoints, sync
    )
    logger.info("critic targets: lambda_target = %.6f", service.lambda_target)
    PUBLISHED.labels(runtime.experiment_id).set(service.version)
    return service


def _start_learner(
    factory: TrainerFactory[Any],
    spec: ExperimentSpec,
    critic: CriticSpec,
    store: WeightStore,
    context: DistributedContext,
    checkpoints: TrainerCheckpoints | None,
) -> tuple[CriticLearner, int]:
    """Every rank builds the learner from the version rank 0 chose: the newest critic, else a fresh one."""
    choice: tuple[str, int, str] | None = None
    if context.is_main:
        latest = store.latest("critic")
        if latest is None:
            policy_version, policy_path = store.wait_latest("policy")
            choice = ("fresh", policy_version, str(policy_path))
        else:
            choice = ("resume", latest[0], str(latest[1]))
    how, version, path = broadcast_object(choice)
    if how == "resume":
        logger.info("resuming from critic version %d", version)

        def policy_dir() -> Path:
            return Path(spec.policy.path) if spec.policy.path else store.wait_latest("policy")[1]

        learner = factory.resume(critic, Path(path), policy_dir, spec.seed)
        _restore(learner, version, checkpoints, context)
        return learner, version
    trainer = factory.fresh(critic, Path(path), spec.seed)
    if isinstance(trainer, HFTrainer):
        published = trainer.publish(store, "critic")  # every rank: a collective under FSDP2
    else:
        published = store.publish("critic", trainer.save)
    if context.is_main:
        logger.info(
            "initialised critic from policy version %d, published as critic version %s", version, published
        )
    return trainer, published or 0


def _restore(
    trainer: CriticLearner, version: int, checkpoints: TrainerCheckpoints | None, context: DistributedContext
) -> None:
    """Every rank: the newest checkpoint's training state. Its weights too when it is of the
    version resumed or newer (a broadcast version may not be on the volume); else only the
    AdamW state and step (a version was published after it: the moments are that stale)."""
    found = checkpoints.latest() if checkpoints is not None else None
    if found is None or checkpoints is None or not isinstance(trainer, HFTrainer):
        return
    meta, path = found
    exact = int(meta.extra.get("version", -1)) >= version
    checkpoints.load(trainer, path, weights=exact)
    if context.is_main:
        logger.info(
            "resumed the critic's %s of update %d (checkpoint of version %s) from %s",
            "whole training state" if exact else "AdamW state",
            meta.step,
            meta.extra.get("version"),
            path,
        )


def _checkpoints(critic: CriticSpec, runtime: ServiceRuntime) -> TrainerCheckpoints | None:
    """The critic's DCP checkpoints in the run's state directory (None: the critic's spec asks for none)."""
    if not isinstance(critic, TrainerProcessesConfig) or critic.checkpoint_every is None:
        return None
    state_dir = runtime.state_dir or runtime.weights_dir / "state"
    return TrainerCheckpoints(
        state_dir / "critic_trainer_checkpoints", critic.checkpoint_keep, critic.checkpoint_every
    )


def serve(runtime: ServiceRuntime) -> None:
    started = start(runtime)
    if started is not None:
        started.serve_until_signal()


def start(runtime: ServiceRuntime) -> StartedService | None:
    """Rank 0 (or the only rank): the critic's trainer serving gRPC, training in a thread. Other
    ranks follow rank 0's batches here until it stops, then return None."""
    spec = load_spec(runtime.spec_path)
    if spec.critic is None:
        raise SystemExit("value-trainer: the experiment spec has no critic section")
    context = init_distributed_from_env()
    torch.manual_seed(spec.seed)  # a fresh critic's head is the same in every run of the spec
    service = build_value_trainer(spec, spec.critic, runtime, context)
    if not context.is_main:
        _serve_other_rank(runtime, service)
        return None
    running = start_server(
        service="value-trainer",
        add_servicers=lambda server: value_pb2_grpc.add_ValueTrainerServicer_to_server(service, server),
        service_names=[value_pb2.DESCRIPTOR.services_by_name["ValueTrainer"].full_name],
        **runtime.server_options(),
    )
    service.start()
    return StartedService(running, on_stop=service.stop)


def _serve_other_rank(runtime: ServiceRuntime, service: ValueTrainerService) -> None:
    """Follow rank 0's batches until it stops; the first rank of every other pod also answers gRPC health (its probes)."""
    leave_sigterm_to_rank_zero()
    health = start_rank_health("value-trainer", runtime.port, runtime.host)
    try:
        service.follow()
        logger.info("rank %d: rank 0 ended training", service.context.rank)
    finally:
        service.stop()
        if health is not None:
            health.stop()
