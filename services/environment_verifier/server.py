"""environment-verifier: serves one experiment's environment over gRPC.

Stateless: episode state travels in the messages (``EpisodeState.data_json``), so any replica
can step any episode and replicas scale horizontally. Every answer is scored in a killable
worker process under a per-answer time limit (:mod:`lecritique.envs.isolation`), so no answer
holds this process: a killed scorer scores 0 with its diagnostic and is counted in
``lecritique_env_scorers_killed_total``.
"""

from __future__ import annotations

import json
import logging
import time

import grpc
from prometheus_client import Counter, Histogram

from lecritique.config import load_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.envs import EnvironmentConfigBase, build_environment
from lecritique.envs.isolation import IsolatedEnvironment, ScoringError
from lecritique.envs.scoring_pool import Killed, ScoringLimits, ScoringPool
from lecritique.rpc.codec import episode_from_proto, episode_to_proto, task_from_proto, task_to_proto
from lecritique.rpc.server import StartedService, start_server
from lecritique.v1 import common_pb2, environment_pb2, environment_pb2_grpc

logger = logging.getLogger(__name__)

EPISODES_FINISHED = Counter(
    "lecritique_env_episodes_finished_total", "Episodes that ended", ["experiment", "environment", "outcome"]
)
STEP_SECONDS = Histogram(
    "lecritique_env_step_seconds", "Time to step one batch of episodes", ["experiment", "environment"]
)
VERIFICATIONS = Counter(
    "lecritique_env_verifications_total",
    "Scored completions and episode steps",
    ["experiment", "environment"],
)
SCORERS_KILLED = Counter(
    "lecritique_env_scorers_killed_total",
    "Answers whose scorer overran the per-answer limit (timeout) or died, each scored 0",
    ["experiment", "environment", "reason"],
)


class EnvironmentVerifierServicer(environment_pb2_grpc.EnvironmentVerifierServicer):
    def __init__(self, environment: IsolatedEnvironment, experiment: str) -> None:
        self.environment = environment
        self.experiment = experiment
        self.labels = (experiment, environment.name)
        environment.on_kill = self._killed

    def _killed(self, killed: Killed) -> None:
        SCORERS_KILLED.labels(*self.labels, killed.reason).inc()

    def SampleTasks(self, request, context):
        if request.split not in ("train", "eval"):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"split must be 'train' or 'eval', got {request.split!r}"
            )
        if request.n < 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"n must be >= 0, got {request.n}")
        try:
            tasks = self.environment.sample_tasks(request.n, split=request.split, seed=request.seed)
        except ScoringError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error)[:1000])
        return environment_pb2.SampleTasksResponse(tasks=[task_to_proto(t) for t in tasks])

    def Reset(self, request, context):
        states = [self.environment.reset(task_from_proto(t)) for t in request.tasks]
        return environment_pb2.ResetResponse(states=[episode_to_proto(s) for s in states])

    def Step(self, request, context):
        start = time.perf_counter()
        items = []
        for item in request.items:
            state = episode_from_proto(item.state)
            if state.done:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"episode of task {state.task.task_id} is already done"
                )
            items.append((state, item.action))
        try:
            stepped = self.environment.step_many(items)
        except ScoringError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error)[:1000])
        results = []
        for result in stepped:
            if result.done:
                EPISODES_FINISHED.labels(*self.labels, "success" if result.reward > 0 else "failure").inc()
            results.append(
                environment_pb2.StepResult(
                    state=episode_to_proto(result.state),
                    observation=result.observation,
                    reward=result.reward,
                    done=result.done,
                    diagnostic=result.diagnostic,
                )
            )
        VERIFICATIONS.labels(*self.labels).inc(len(results))
        STEP_SECONDS.labels(*self.labels).observe(time.perf_counter() - start)
        return environment_pb2.StepResponse(results=results)

    def Score(self, request, context):
        items = [(task_from_proto(item.task), item.completion) for item in request.items]
        try:
            scored = self.environment.score_many(items)
        except ScoringError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error)[:1000])
        results = [environment_pb2.ScoreResult(reward=s.reward, diagnostic=s.diagnostic) for s in scored]
        VERIFICATIONS.labels(*self.labels).inc(len(results))
        return environment_pb2.ScoreResponse(results=results)

    def Info(self, request, context):
        details = {
            "environment": self.environment.name,
            "multi_turn": self.environment.multi_turn,
            "max_turns": self.environment.environment.max_turns,
            "privileged_kinds": list(self.environment.environment.privileged_kinds),
            "answer_seconds": self.environment.answer_seconds,
        }
        return common_pb2.ServiceInfo(
            service="environment-verifier",
            experiment=self.experiment,
            weights_version=-1,
            details_json=json.dumps(details),
        )


def servicer_for(
    config: EnvironmentConfigBase, experiment: str, limits: ScoringLimits | None = None
) -> tuple[EnvironmentVerifierServicer, ScoringPool]:
    """The servicer of environment ``config``, scoring in a new pool (the caller closes it)."""
    pool = ScoringPool(limits or ScoringLimits.from_environment())
    try:
        environment = IsolatedEnvironment(build_environment(config), config, pool)
    except BaseException:
        pool.close()
        raise
    return EnvironmentVerifierServicer(environment, experiment), pool


def serve(runtime: ServiceRuntime) -> None:
    start(runtime).serve_until_signal()


def start(runtime: ServiceRuntime) -> StartedService:
    """The environment of the runtime's spec, serving on its port."""
    spec = load_spec(runtime.spec_path)
    servicer, pool = servicer_for(spec.environment, runtime.experiment_id)
    running = start_server(
        service="environment-verifier",
        add_servicers=lambda server: environment_pb2_grpc.add_EnvironmentVerifierServicer_to_server(
            servicer, server
        ),
        service_names=[environment_pb2.DESCRIPTOR.services_by_name["EnvironmentVerifier"].full_name],
        **runtime.server_options(),
    )
    return StartedService(running, on_stop=pool.close)
