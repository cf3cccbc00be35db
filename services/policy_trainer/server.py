"""policy-trainer: one optimiser step per ``Train`` call, then publish the new policy weights.

Runs as one process or under ``torchrun`` (several data-parallel ranks, gloo on CPU, NCCL on
GPU). Rank 0 serves gRPC and hands each batch to the training loop, which broadcasts it to every
rank (:func:`lecritique.training.policy_worker.run_policy_worker`); rank 0 alone publishes.

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
from typing import Any

import grpc
import torch
from prometheus_client import Counter, Gauge, Histogram

from lecritique.config import load_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.rpc.codec import trajectory_from_proto
from lecritique.rpc.server import run_until_signal, start_server
from lecritique.trajectory import Trajectory
from lecritique.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from lecritique.weights import WeightStore

logger = logging.getLogger(__name__)

STEPS = Counter("lecritique_policy_updates_total", "Policy optimiser steps", ["experiment"])
LOSS = Gauge("lecritique_policy_loss", "Policy loss of the last update", ["experiment"])
TRAIN_SECONDS = Histogram(
    "lecritique_policy_train_seconds", "Time per policy update", ["experiment"],
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
            step=data["step"], policy_version=data["policy_version"], path=data["path"],
            metrics={k: float(v) for k, v in data.get("metrics", {}).items()},
        )

    def Train(self, request, context):
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
                trajectories = [trajectory_from_proto(t) for t in request.trajectories]
            except ValueError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            if not trajectories:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a training batch needs at least one trajectory")
            missing = [t.trajectory_id for t in trajectories if t.advantages is None]
            if missing:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"trajectories without advantages: {missing[:5]}")
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
            last_step=self.record.step, policy_version=data.get("policy_version", 0), path=data.get("path", "")
        )

    def Info(self, request, context):
        latest = self.store.latest("policy")
        return common_pb2.ServiceInfo(
            service="policy-trainer", experiment=self.experiment, weights_version=-1 if latest is None else latest[0],
            details_json=json.dumps({"last_step": self.record.step}),
        )


class _TrainingLoop:
    """Rank 0's training thread: takes Train jobs, steps, publishes, answers the job."""

    def __init__(self, trainer: Any, store: WeightStore, record: StepRecord, servicer: PolicyTrainerServicer, experiment: str) -> None:
        self.trainer = trainer
        self.store = store
        self.record = record
        self.servicer = servicer
        self.experiment = experiment
        self.current: _Job | None = None

    def next_batch(self) -> list[Trajectory] | None:
        job = self.servicer.jobs.get()
        if job is None:
            return None
        self.current = job
        return job.trajectories

    def on_step(self, _steps: int, metrics: dict[str, float]) -> None:
        job, self.current = self.current, None
        assert job is not None
        try:
            published = self.store.publish("policy", self.trainer.save, keep_last=3)
            result = {
                "step": job.step,
                "policy_version": published,
                "path": str(self.store.path("policy", published)),
                "metrics": metrics,
            }
            self.record.save(result)
            job.result = result
            STEPS.labels(self.experiment).inc()
            LOSS.labels(self.experiment).set(metrics["loss"])
            TRAIN_SECONDS.labels(self.experiment).observe(metrics["step_seconds"])
            TRAINED_TOKENS.labels(self.experiment).inc(metrics["tokens"])
            PUBLISHED.labels(self.experiment).set(published)
        except BaseException as error:  # reported to the caller of Train
            job.error = error
        finally:
            job.done.set()

    def run(self, distributed: bool) -> None:
        from lecritique.training.policy_worker import run_policy_worker

        while True:
            try:
                run_policy_worker(self.trainer, self.next_batch, self.on_step)
                return
            except Exception as error:
                job, self.current = self.current, None
                logger.exception("policy update failed")
                if job is not None:
                    job.error = error
                    job.done.set()
                if distributed:
                    # Other ranks may be stuck in a collective: fail the whole group loudly.
                    os._exit(1)


def serve(runtime: ServiceRuntime) -> None:
    from lecritique.redis_connection import redis_client
    from lecritique.training.distributed import init_distributed_from_env
    from lecritique.training.policy_trainer import PolicyTrainer
    from lecritique.training.policy_worker import run_policy_worker

    spec = load_spec(runtime.spec_path)
    context = init_distributed_from_env()
    torch.manual_seed(spec.seed)
    redis = redis_client(runtime.redis_url) if runtime.redis_url and context.is_main else None
    store = WeightStore(runtime.weights_dir, redis=redis, experiment=runtime.experiment_id)
    if context.is_main and store.latest("policy") is None:
        if spec.policy.path is None:
            raise SystemExit("policy-trainer: the spec's policy has no resolved path (run through `lecritique run`)")
        store.publish("policy", spec.policy.path)
    if context.enabled:
        torch.distributed.barrier()
    version, path = store.wait_latest("policy")
    trainer = PolicyTrainer(path, spec.policy_trainer)
    logger.info("policy trainer rank %d of %d starts from version %d", context.rank, context.world_size, version)

    if not context.is_main:
        run_policy_worker(trainer, lambda: None)
        return

    state_dir = runtime.state_dir or runtime.weights_dir / "state"
    record = StepRecord(state_dir / "policy_trainer.json")
    if record.step == 0:
        record.data.update({"policy_version": version, "path": str(path)})
    servicer = PolicyTrainerServicer(store, record, runtime.experiment_id)
    loop = _TrainingLoop(trainer, store, record, servicer, runtime.experiment_id)
    training = threading.Thread(target=loop.run, args=(context.enabled,), name="policy-training", daemon=True)
    training.start()
    running = start_server(
        service="policy-trainer",
        add_servicers=lambda server: policy_pb2_grpc.add_PolicyTrainerServicer_to_server(servicer, server),
        service_names=[policy_pb2.DESCRIPTOR.services_by_name["PolicyTrainer"].full_name],
        **runtime.server_options(),
    )
    run_until_signal(running, on_stop=lambda: servicer.jobs.put(None))
    training.join(timeout=30)
