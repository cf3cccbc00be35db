"""value-evaluator: the serving copy of the critic (Le Critique Appendix B.1).

Serves the newest published critic. A watcher thread loads each newly published version in the
background and swaps it in between requests (a request keeps the model it started with), so no
request is dropped or served by a half-loaded model, and every response names its version.
Critic kinds plug in behind :class:`lecritique.critics.types.CriticBackend` (the table of kinds is
:mod:`lecritique.critics.kinds`); a kind without trained versions (the frozen LLM) is served as
version 0 and never swapped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import Counter, Gauge, Histogram

from lecritique.config import ExperimentSpec, load_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.critics.kinds import ServingContext, critic_kind
from lecritique.critics.specs import CriticSpec
from lecritique.critics.types import ActorInfo, CriticBackend, CriticQuery, Peer
from lecritique.rpc.codec import fill_ragged
from lecritique.rpc.server import StartedService, start_server
from lecritique.rpc.wire import WireRequest, add_servicer
from lecritique.v1 import common_pb2, value_pb2, value_pb2_grpc
from lecritique.weights import WeightStore

logger = logging.getLogger(__name__)

EVALUATOR_SERVICE = value_pb2.DESCRIPTOR.services_by_name["ValueEvaluator"]
# Audit log of every critic input (JSON lines): what privileged context each trajectory's critic saw.
INPUT_LOG_ENV = "LECRITIQUE_VALUE_INPUT_LOG"

EVALUATED = Counter("lecritique_value_evaluated_trajectories_total", "Trajectories evaluated", ["experiment"])
EVALUATE_SECONDS = Histogram(
    "lecritique_value_evaluate_seconds",
    "Time per Evaluate request",
    ["experiment"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
SERVED_VERSION = Gauge("lecritique_value_evaluator_version", "Critic version being served", ["experiment"])
SWAPS = Counter("lecritique_value_evaluator_swaps_total", "Critic hot swaps", ["experiment"])


class _SharedLock:
    """Many readers (Evaluate calls) or one writer (a broadcast version being copied into the model)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            while self._writing:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._condition:
            while self._writing or self._readers:
                self._condition.wait()
            self._writing = True
        try:
            yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()


@dataclass
class _Served:
    version: int
    backend: CriticBackend


def critic_queries(wire_request: WireRequest[value_pb2.EvaluateRequest]) -> list[CriticQuery]:
    """The library's view of the request: each trajectory with its input's context and peers."""
    # Critics only read a trajectory's arrays: read-only views of the received bytes, no copy.
    trajectories = wire_request.trajectories()
    request = wire_request.message
    if len(trajectories) != len(request.inputs):
        raise ValueError(
            f"EvaluateRequest has {len(request.inputs)} inputs for {len(trajectories)} trajectories"
        )
    return [
        CriticQuery(
            trajectory,
            item.context_text,
            tuple(Peer(p.trajectory_id, p.summary, p.reward) for p in item.peers),
        )
        for trajectory, item in zip(trajectories, request.inputs, strict=True)
    ]


def policy_directory(spec: ExperimentSpec, store: WeightStore) -> Path:
    """The policy whose tokenizer text critics decode trajectories with (any version: tokenizers never change)."""
    if spec.policy.path is not None:
        return Path(spec.policy.path)
    return store.wait_latest("policy")[1]


class ValueEvaluatorServicer(value_pb2_grpc.ValueEvaluatorServicer):
    def __init__(
        self,
        store: WeightStore,
        critic: CriticSpec,
        policy_dir: Path,
        experiment: str,
        poll_seconds: float = 0.5,
        input_log: Path | None = None,
    ) -> None:
        self.store = store
        self.input_log = input_log
        self.critic = critic
        self.kind = critic_kind(critic)
        self.experiment = experiment
        self.poll_seconds = poll_seconds
        self.policy_dir = policy_dir
        self._lock = threading.Lock()
        self._weights = _SharedLock()
        self.receiver: Any = None
        """The broadcast receiver when critic versions arrive from the value trainer over a collective group."""
        self._stop = threading.Event()
        if self.kind.trained:
            version, path = store.wait_latest("critic")
            self._served = _Served(version, self._load(path, version))
            self._watcher: threading.Thread | None = threading.Thread(
                target=self._watch, name="critic-watcher", daemon=True
            )
            self._watcher.start()
        else:
            self._served = _Served(0, self._load(None, 0))
            self._watcher = None
        SERVED_VERSION.labels(experiment).set(self._served.version)

    def _load(self, path: Path | None, version: int) -> CriticBackend:
        return self.kind.backend(self.critic, path, ServingContext(self.policy_dir, version, self.experiment))

    @property
    def served(self) -> _Served:
        with self._lock:
            return self._served

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            latest = self.store.latest("critic")
            if latest is None or latest[0] <= self.served.version:
                continue
            version, path = latest
            current = self.served.backend
            try:
                # A backend that swaps in place keeps its engine up; others are rebuilt.
                backend = current if current.reload(version, path) else self._load(path, version)
            except Exception:
                # A version pruned while loading, or a transient read error: the next poll retries.
                logger.exception(
                    "could not load critic version %d; keeping version %d", version, self.served.version
                )
                continue
            with self._lock:
                if version <= self._served.version:  # a broadcast got there first
                    continue
                self._served = _Served(version, backend)
            self._swapped(version)

    def _swapped(self, version: int) -> None:
        SERVED_VERSION.labels(self.experiment).set(version)
        SWAPS.labels(self.experiment).inc()
        logger.info("now serving critic version %d", version)

    def start_broadcast_receiver(self) -> None:
        """Take critic versions from the value trainer's broadcast, copied in place into the served model."""
        from lecritique.weights.broadcast import BroadcastReceiver, model_tensors

        def tensors() -> dict[str, Any]:
            return dict(model_tensors(self.served.backend.predictor.engine.model))  # type: ignore[attr-defined]

        def received(version: int) -> None:
            with self._lock:
                self._served = _Served(version, self._served.backend)
            self._swapped(version)

        self.receiver = BroadcastReceiver(
            self.store.role_dir("critic"), tensors, self._weights.writing, received
        ).start()

    def stop(self) -> None:
        self._stop.set()
        if self.receiver is not None:
            self.receiver.stop()

    def Evaluate(self, request, context):
        start = time.perf_counter()
        try:
            queries = critic_queries(request)
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        if self.input_log is not None:
            self._audit(request.message, queries)
        actor = ActorInfo(request.message.actor_description, request.message.actor_reward_average)
        # This request is answered entirely by one version: a broadcast waits for it to finish.
        with self._weights.reading():
            served = self.served
            try:
                result = served.backend.values(queries, actor)
            except ValueError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        EVALUATED.labels(self.experiment).inc(len(result.values))
        EVALUATE_SECONDS.labels(self.experiment).observe(time.perf_counter() - start)
        # An engine swapped in place reports the version that actually generated.
        version = served.version if result.version is None else result.version
        response = value_pb2.EvaluateResponse(value_version=version, stats=result.stats)
        fill_ragged(response.values, result.values, "float32", "values")
        return response

    def _audit(self, request: value_pb2.EvaluateRequest, queries: list[CriticQuery]) -> None:
        assert self.input_log is not None
        with self.input_log.open("a") as handle:
            for query in queries:
                trajectory = query.trajectory
                context_ids = trajectory.critic_context_ids
                record = {
                    "trajectory_id": trajectory.trajectory_id,
                    "group_id": trajectory.group_id,
                    "reward": trajectory.reward,
                    "context_text": query.context_text,
                    "context_ids": [] if context_ids is None else context_ids.tolist(),
                    "peers": [{"trajectory_id": p.trajectory_id, "reward": p.reward} for p in query.peers],
                    "actor_description": request.actor_description,
                    "actor_reward_average": request.actor_reward_average,
                }
                handle.write(json.dumps(record) + "\n")

    def Info(self, request, context):
        return common_pb2.ServiceInfo(
            service="value-evaluator",
            experiment=self.experiment,
            weights_version=self.served.version,
            details_json=json.dumps({"critic_kind": self.kind.name, "context": self.critic.context}),
        )


def serve(runtime: ServiceRuntime) -> None:
    start(runtime).serve_until_signal()


def start(runtime: ServiceRuntime) -> StartedService:
    """The spec's critic (its newest version, hot-swapped as new ones arrive), serving on the runtime's port."""
    spec = load_spec(runtime.spec_path)
    if spec.critic is None:
        raise SystemExit("value-evaluator: the experiment spec has no critic section")
    store = WeightStore(runtime.weights_dir, experiment=runtime.experiment_id)
    input_log = Path(os.environ[INPUT_LOG_ENV]) if os.environ.get(INPUT_LOG_ENV) else None
    servicer = ValueEvaluatorServicer(
        store, spec.critic, policy_directory(spec, store), runtime.experiment_id, input_log=input_log
    )
    transport = getattr(spec.critic, "weight_transport", None)
    if transport is not None and transport.kind == "broadcast":
        servicer.start_broadcast_receiver()
    running = start_server(
        service="value-evaluator",
        add_servicers=lambda server: add_servicer(
            server, servicer, EVALUATOR_SERVICE, {"Evaluate": "trajectories"}
        ),
        service_names=[EVALUATOR_SERVICE.full_name],
        **runtime.server_options(),
    )
    return StartedService(running, on_stop=servicer.stop)
