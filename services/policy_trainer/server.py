"""policy-trainer: one optimiser step per ``Train`` call, then publish the new policy weights.

Runs as one process or under ``torchrun`` (several data-parallel ranks, gloo on CPU, NCCL on
GPU). Rank 0 serves gRPC and hands each batch to the training loop, which broadcasts it to every
rank (:func:`lecritique.training.policy_worker.run_policy_worker`). After every step each rank
publishes (rank 0 writes; under FSDP2 the others help gather the shards) through the configured
weight transport, and checkpoints its training state (DCP) so a restart resumes AdamW and the step.

``Train`` is idempotent per orchestrator step: the last step's response is recorded on disk, and
a repeated step (an orchestrator that restarted between sending a step and committing it) gets
that record back instead of a second update. A step that skips ahead is refused.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import torch
from prometheus_client import Counter, Gauge, Histogram

from lecritique.config import load_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.rpc.server import StartedService, start_rank_health, start_server
from lecritique.rpc.wire import add_servicer
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from lecritique.weights import WeightStore

if TYPE_CHECKING:
    from lecritique.config import ExperimentSpec
    from lecritique.training.distributed import DistributedContext

logger = logging.getLogger(__name__)

TRAINER_SERVICE = policy_pb2.DESCRIPTOR.services_by_name["PolicyTrainer"]
STEPS = Counter("lecritique_policy_updates_total", "Policy optimiser steps", ["experiment"])
LOSS = Gauge("lecritique_policy_loss", "Policy loss of the last update", ["experiment"])
TRAIN_SECONDS = Histogram(
    "lecritique_policy_train_seconds",
    "Time per policy update",
    ["experiment"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
TRAINED_TOKENS = Counter("lecritique_policy_trained_tokens_total", "Tokens in policy batches", ["experiment"])
PUBLISHED = Gauge("lecritique_policy_published_version", "Newest published policy version", ["experiment"])


@dataclass
class _Job:
    step: int
    trajectories: list[Trajectory]
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: BaseException | None = None


class StepRecord:
    """The last applied step and its response, persisted atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"step": 0}

    @property
    def step(self) -> int:
        return int(self.data["step"])

    def save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(data))
        os.replace(temporary, self.path)
        self.data = data


class PolicyTrainerServicer(policy_pb2_grpc.PolicyTrainerServicer):
    def __init__(self, store: WeightStore, record: StepRecord, experiment: str) -> None:
        self.store = store
        self.record = record
        self.experiment = experiment
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.lock = threading.Lock()

    def _response(self, data: dict[str, Any]) -> policy_pb2.TrainResponse:
        return policy_pb2.TrainResponse(
            step=data["step"],
            policy_version=data["policy_version"],
            path=data["path"],
            metrics={k: float(v) for k, v in data.get("metrics", {}).items()},
        )

    def Train(self, wire_request, context):
        request = wire_request.message
        with self.lock:  # one step at a time, in order
            if request.step == self.record.step and request.step > 0:
                logger.info("step %d was already applied; answering from the record", request.step)
                return self._response(self.record.data)
            if request.step != self.record.step + 1:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"step {request.step} does not follow the last applied step {self.record.step}",
                )
            try:
                # Collation copies into its own tensors: read-only views of the received bytes suffice.
                trajectories = wire_request.trajectories()
            except ValueError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            if not trajectories:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "a training batch needs at least one trajectory"
                )
            missing = [t.trajectory_id for t in trajectories if t.advantages is None]
            if missing:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"trajectories without advantages: {missing[:5]}"
                )
            job = _Job(request.step, trajectories)
            self.jobs.put(job)
            job.done.wait()
            if job.error is not None:
                context.abort(grpc.StatusCode.INTERNAL, f"policy update failed: {job.error}")
            assert job.result is not None
            return self._response(job.result)

    def Status(self, request, context):
        data = self.record.data
        return policy_pb2.PolicyTrainerStatus(
            last_step=self.record.step,
            policy_version=data.get("policy_version", 0),
            path=data.get("path", ""),
        )

    def Info(self, request, context):
        latest = self.store.latest("policy")
        return common_pb2.ServiceInfo(
            service="policy-trainer",
            experiment=self.experiment,
            weights_version=-1 if latest is None else latest[0],
            details_json=json.dumps({"last_step": self.record.step}),
        )


def _start_trainer(spec: Any, store: WeightStore, record: StepRecord, checkpoints: Any) -> Any:
    """The trainer on the newest published policy, resumed from the newest checkpoint (every rank)."""
    from lecritique.training.checkpoint import resume
    from lecritique.training.policy_trainer import PolicyTrainer

    version, path = store.wait_latest("policy")
    trainer = PolicyTrainer(path, spec.policy_trainer)
    if checkpoints is not None:
        outcome = resume(trainer, checkpoints, applied_step=record.step)
        if outcome.record is not None and trainer.context.is_main:
            # The checkpoint of the step was written but its record was not: the step was applied.
            record.save(outcome.record)
        logger.info("policy trainer resume: %s at step %d", outcome.mode, outcome.step)
    else:
        trainer.engine.steps = record.step
    logger.info(
        "policy trainer rank %d of %d starts from version %d",
        trainer.context.rank,
        trainer.context.world_size,
        version,
    )
    return trainer


def serve(runtime: ServiceRuntime) -> None:
    started = start(runtime)
    if started is not None:
        started.serve_until_signal()


def start(runtime: ServiceRuntime) -> StartedService | None:
    """Rank 0 (or the only rank): the trainer serving gRPC, training in a thread. Other ranks
    follow rank 0's steps here until it stops, then return None."""
    from lecritique.training.checkpoint import TrainerCheckpoints
    from lecritique.training.distributed import init_distributed_from_env
    from lecritique.training.weight_sync import WeightSync, publish_dtype

    spec = load_spec(runtime.spec_path)
    context = init_distributed_from_env()
    torch.manual_seed(spec.seed)
    store = _policy_store(runtime, spec, context)
    state_dir = runtime.state_dir or runtime.weights_dir / "state"
    # Every rank reads the record (a shared volume across pods): resuming is a collective decision.
    record = StepRecord(state_dir / "policy_trainer.json")
    settings = spec.policy_trainer
    checkpoints = (
        TrainerCheckpoints(
            state_dir / "policy_trainer_checkpoints", settings.checkpoint_keep, settings.checkpoint_every
        )
        if settings.checkpoint_every is not None
        else None
    )
    trainer = _start_trainer(spec, store, record, checkpoints)
    # Broadcast: rank 0 sends changed tensors to every rollout replica; else a directory per version.
    sync = WeightSync(
        trainer,
        store,
        "policy",
        settings.weight_transport,
        receivers=spec.rollout.replicas,
        keep_last=3,
        dtype=publish_dtype(settings.publish_dtype),
    )
    current: dict[str, Any] = {}

    def after_step(steps: int, metrics: dict[str, float]) -> None:
        """Every rank: publish (gathered from the shards under FSDP2), then checkpoint with the step's record."""
        published = sync.publish()
        if context.is_main:
            job = current["job"]
            current["result"] = {
                "step": job.step,
                "policy_version": published,
                "path": str(store.path("policy", published)),
                "metrics": metrics,
            }
        if checkpoints is not None:
            checkpoints.save_if_due(trainer, extra={"record": current.get("result")})

    if not context.is_main:
        _serve_other_rank(runtime, trainer, after_step)
        return None
    if record.step == 0:
        latest = store.latest("policy")
        assert latest is not None
        record.data.update({"policy_version": latest[0], "path": str(latest[1])})
    servicer = PolicyTrainerServicer(store, record, runtime.experiment_id)
    return _start_rank_zero(runtime, servicer, trainer, current, after_step, context.enabled)


def _policy_store(runtime: ServiceRuntime, spec: ExperimentSpec, context: DistributedContext) -> WeightStore:
    """The weight store, holding the spec's policy as version 0 when nothing is published yet
    (rank 0 publishes, announced in Redis; every rank waits for it)."""
    from lecritique.redis_connection import redis_client

    redis = redis_client(runtime.redis_url) if runtime.redis_url and context.is_main else None
    store = WeightStore(runtime.weights_dir, redis=redis, experiment=runtime.experiment_id)
    if context.is_main and store.latest("policy") is None:
        if spec.policy.path is None:
            raise SystemExit(
                "policy-trainer: the spec's policy has no resolved path (run through `lecritique run`)"
            )
        store.publish("policy", spec.policy.path)
    if context.enabled:
        torch.distributed.barrier()
    return store


def _serve_other_rank(runtime: ServiceRuntime, trainer: Any, after_step: Any) -> None:
    """Follow rank 0's steps until it stops; the first rank of every other pod also answers gRPC health (its probes)."""
    from lecritique.training.distributed import leave_sigterm_to_rank_zero
    from lecritique.training.policy_worker import run_policy_worker

    leave_sigterm_to_rank_zero()
    health = start_rank_health("policy-trainer", runtime.port, runtime.host)
    try:
        run_policy_worker(trainer, lambda: None, after_step=after_step)
    finally:
        if health is not None:
            health.stop()


def _next_batch(servicer: PolicyTrainerServicer, current: dict[str, Any]) -> Any:
    """Rank 0: the next Train call's batch, IDLE after a heartbeat's wait, None once stopping."""
    from lecritique.training.distributed import HEARTBEAT_SECONDS, IDLE

    try:
        # The other ranks wait inside a collective meanwhile: tell them now and then that none is coming yet.
        job = servicer.jobs.get(timeout=HEARTBEAT_SECONDS)
    except queue.Empty:
        return IDLE
    if job is None:
        return None
    current["job"] = job
    return job.trajectories


def _finish_job(
    servicer: PolicyTrainerServicer, current: dict[str, Any], experiment: str, metrics: dict[str, float]
) -> None:
    """Rank 0, after a step: save its record, hand the result (or the error) to the waiting Train
    call, and count it in the Prometheus metrics."""
    job = current.pop("job")
    try:
        result = current.pop("result")
        servicer.record.save(result)
        job.result = result
        STEPS.labels(experiment).inc()
        LOSS.labels(experiment).set(metrics["loss"])
        TRAIN_SECONDS.labels(experiment).observe(metrics["step_seconds"])
        TRAINED_TOKENS.labels(experiment).inc(metrics["tokens"])
        PUBLISHED.labels(experiment).set(result["policy_version"])
    except BaseException as error:  # reported to the caller of Train
        job.error = error
    finally:
        job.done.set()


def _start_rank_zero(
    runtime: ServiceRuntime,
    servicer: PolicyTrainerServicer,
    trainer: Any,
    current: dict[str, Any],
    after_step: Any,
    distributed: bool,
) -> StartedService:
    from lecritique.training.distributed import Idle
    from lecritique.training.policy_worker import run_policy_worker

    experiment = runtime.experiment_id

    def next_batch() -> list[Trajectory] | Idle | None:
        return _next_batch(servicer, current)

    def on_step(_steps: int, metrics: dict[str, float]) -> None:
        _finish_job(servicer, current, experiment, metrics)

    def training_loop() -> None:
        while True:
            try:
                run_policy_worker(trainer, next_batch, on_step, after_step)
                return
            except Exception as error:
                job = current.pop("job", None)
                current.pop("result", None)
                logger.exception("policy update failed")
                if job is not None:
                    job.error = error
                    job.done.set()
                if distributed:
                    # Other ranks may be stuck in a collective: fail the whole group loudly.
                    os._exit(1)

    training = threading.Thread(target=training_loop, name="policy-training", daemon=True)
    training.start()
    running = start_server(
        service="policy-trainer",
        add_servicers=lambda server: add_servicer(
            server, servicer, TRAINER_SERVICE, {"Train": "trajectories"}
        ),
        service_names=[TRAINER_SERVICE.full_name],
        **runtime.server_options(),
    )

    def stop_training() -> None:
        servicer.jobs.put(None)
        training.join(timeout=30)

    return StartedService(running, on_stop=stop_training)
