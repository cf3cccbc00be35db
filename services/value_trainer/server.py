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
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import Counter, Gauge

from lecritique.advantages.targets import critic_targets
from lecritique.config import ExperimentSpec, load_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.critics.kinds import CriticLearner, critic_kind
from lecritique.critics.specs import CriticSpec, TrainedCriticSpec
from lecritique.redis_connection import connect_redis
from lecritique.replay import ReplayBuffer
from lecritique.rpc.server import run_until_signal, start_server
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2, value_pb2, value_pb2_grpc
from lecritique.weights import WeightStore

logger = logging.getLogger(__name__)

UPDATES = Counter("lecritique_value_updates_total", "Critic optimiser steps", ["experiment"])
LOSS = Gauge("lecritique_value_loss", "Critic loss of the last update", ["experiment"])
TRAIN_EV = Gauge(
    "lecritique_value_train_explained_variance", "Explained variance of the last critic batch (pre-update)", ["experiment"]
)
PUBLISHED = Gauge("lecritique_value_published_version", "Newest published critic version", ["experiment"])


class ValueTrainerService(value_pb2_grpc.ValueTrainerServicer):
    def __init__(self, spec: ExperimentSpec, critic: CriticSpec, runtime: ServiceRuntime) -> None:
        self.spec = spec
        self.critic = critic
        self.kind = critic_kind(critic)
        self.experiment = runtime.experiment_id
        redis = connect_redis(runtime.redis_url)
        self.store = WeightStore(runtime.weights_dir, redis=redis, experiment=self.experiment)
        self.trainer: CriticLearner | None = None
        version = 0
        factory = self.kind.trainer
        if factory is None:
            logger.info("the %s critic is never trained: value trainer idle", self.kind.name)
        else:
            latest = self.store.latest("critic")
            if latest is None:
                policy_version, policy_path = self.store.wait_latest("policy")
                self.trainer = factory.fresh(critic, policy_path, spec.seed)
                version = self.store.publish("critic", self.trainer.save)
                logger.info("initialised critic from policy version %d, published as critic version %d", policy_version, version)
            else:
                version, path = latest
                self.trainer = factory.resume(critic, path, self._policy_dir, spec.seed)
                logger.info("resuming from critic version %d", version)
        self.version = version
        self.replay = ReplayBuffer(redis, self.experiment, **critic.replay.model_dump(), decode=Trajectory.from_bytes)
        # A critic that is never trained has no batches; its Status still reports the replay depth.
        self.batch_size = spec.critic_batch_size
        # ``lambda_target: auto`` resolves to 0.4^(1/L) (Le Critique §7.2): logged, as it is a number only here.
        self.lambda_target = spec.estimator.critic_target_lambda()
        logger.info("critic targets: lambda_target = %.6f", self.lambda_target)
        self.sync = self._weight_sync()
        self.updates = 0
        self.last: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._train_loop, name="critic-training", daemon=True)
        PUBLISHED.labels(self.experiment).set(version)

    def _weight_sync(self) -> Any:
        """How versions reach the evaluators: a broadcast (discriminative critics that ask for it) or the store."""
        critic = self.critic
        transport = getattr(critic, "weight_transport", None)
        if self.trainer is None or not isinstance(critic, TrainedCriticSpec) or transport is None:
            return None
        if transport.kind != "broadcast":
            return None
        from lecritique.training.weight_sync import WeightSync

        return WeightSync(
            self.trainer, self.store, "critic", transport, receivers=critic.evaluator_replicas,
            keep_last=critic.keep_versions,
        )

    def _publish(self, trainer: CriticLearner, critic: TrainedCriticSpec) -> int:
        if self.sync is not None:
            version: int = self.sync.publish()
            return version
        return self.store.publish("critic", trainer.save, keep_last=critic.keep_versions)

    def _policy_dir(self) -> Path:
        return Path(self.spec.policy.path) if self.spec.policy.path else self.store.wait_latest("policy")[1]

    def start(self) -> None:
        if self.trainer is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        if self.sync is not None:
            self.sync.close()

    def _policy_version(self) -> int | None:
        """The newest policy version: announced in Redis (broadcast versions are not all on the volume) or stored."""
        known = [v for v in (self.store.announced("policy"), (self.store.latest("policy") or (None,))[0]) if v is not None]
        return max(known) if known else None

    def _train_loop(self) -> None:
        trainer, critic = self.trainer, self.critic
        assert trainer is not None and isinstance(critic, TrainedCriticSpec), "started only for trained kinds"
        while not self._stop.is_set():
            try:
                if len(self.replay) < self.batch_size:
                    # Le Critique trains on full rollout-sized batches: wait for enough fresh data.
                    self._stop.wait(0.1)
                    continue
                entries = self.replay.sample(self.batch_size, current_policy_version=self._policy_version())
                if len(entries) < self.batch_size:
                    self._stop.wait(0.1)
                    continue
                trajectories = [entry.payload for entry in entries]
                metrics = trainer.train_step(trajectories, critic_targets(trajectories, self.lambda_target))
                version = self.version
                if (self.updates + 1) % critic.publish_every == 0:
                    version = self._publish(trainer, critic)
            except Exception:
                logger.exception("critic update failed; retrying")
                self._stop.wait(1.0)
                continue
            with self._lock:
                self.updates += 1
                self.version = version
                self.last = metrics
            UPDATES.labels(self.experiment).inc()
            LOSS.labels(self.experiment).set(metrics["loss"])
            if np.isfinite(metrics.get("explained_variance", float("nan"))):
                TRAIN_EV.labels(self.experiment).set(metrics["explained_variance"])
            PUBLISHED.labels(self.experiment).set(version)
            logger.info(
                "critic update %d -> version %d (loss %.4f, explained variance %.4f)",
                self.updates, version, metrics["loss"], metrics.get("explained_variance", float("nan")),
            )

    def _status(self) -> value_pb2.ValueTrainerStatus:
        with self._lock:
            last = dict(self.last)
            return value_pb2.ValueTrainerStatus(
                updates=self.updates,
                published_version=self.version,
                last_loss=last.get("loss", float("nan")),
                last_explained_variance=last.get("explained_variance", float("nan")),
                replay_depth=len(self.replay),
                metrics={k: float(v) for k, v in last.items()},
            )

    def Status(self, request, context):
        return self._status()

    def Info(self, request, context):
        return common_pb2.ServiceInfo(
            service="value-trainer", experiment=self.experiment, weights_version=self.version,
            details_json=json.dumps(
                {
                    "batch_size": self.batch_size,
                    "critic_kind": self.kind.name,
                    "loss": None if self.kind.trainer is None else self.kind.trainer.loss(self.critic),
                }
            ),
        )


def serve(runtime: ServiceRuntime) -> None:
    spec = load_spec(runtime.spec_path)
    if spec.critic is None:
        raise SystemExit("value-trainer: the experiment spec has no critic section")
    service = ValueTrainerService(spec, spec.critic, runtime)
    running = start_server(
        service="value-trainer",
        add_servicers=lambda server: value_pb2_grpc.add_ValueTrainerServicer_to_server(service, server),
        service_names=[value_pb2.DESCRIPTOR.services_by_name["ValueTrainer"].full_name],
        **runtime.server_options(),
    )
    service.start()
    run_until_signal(running, on_stop=service.stop)
