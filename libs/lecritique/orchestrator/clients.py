"""Typed clients of the five services, over :class:`~lecritique.rpc.replica_pool.ReplicaPool`.

Every call carries the pool's deadline (``orchestrator.rpc_deadline_seconds``); a service that is
down is retried for ``orchestrator.service_down_seconds`` (it is being restarted), except the
value evaluator, which is never waited on: a batch it cannot score is degraded instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from lecritique.critics.types import ActorInfo, CriticQuery
from lecritique.engines.base import SamplingParams
from lecritique.envs.base import EpisodeState, StepResult, Task
from lecritique.episodes import SampledAction
from lecritique.rpc.codec import (
    episode_from_proto,
    episode_to_proto,
    ragged_from_proto,
    require_tensor,
    task_from_proto,
    task_to_proto,
    to_tensor,
)
from lecritique.rpc.replica_pool import ReplicaPool
from lecritique.rpc.wire import bytes_request_stub, serialize_with_trajectories
from lecritique.trajectory import Trajectory
from lecritique.v1 import (
    common_pb2,
    environment_pb2,
    environment_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
    rollout_pb2,
    rollout_pb2_grpc,
    value_pb2,
    value_pb2_grpc,
)

logger = logging.getLogger(__name__)


class RolloutClient:
    def __init__(self, pool: ReplicaPool[Any]) -> None:
        self.pool = pool
        self.newest: tuple[int, str] | None = None
        """The newest policy version (and path) sent to the replicas by :meth:`load_weights`."""
        self._executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="rollout-client")

    def sample(self, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[list[SampledAction]]:
        """n actions per prompt (the episode player's policy); the prompts are split across every rollout replica."""
        if not prompts:
            return []
        replicas = max(1, len(self.pool.addresses))
        shards = [list(range(i, len(prompts), replicas)) for i in range(min(replicas, len(prompts)))]

        def run(shard_index: int, indices: list[int]) -> tuple[list[int], Any]:
            request = rollout_pb2.GenerateRequest(
                prompts=[to_tensor(np.asarray(prompts[i], dtype=np.int32)) for i in indices],
                n=n,
                sampling=rollout_pb2.SamplingParams(
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    max_tokens=sampling.max_tokens,
                    seed=(sampling.seed or 0) + shard_index,
                ),
            )
            response = self.pool.call("Generate", request)
            newest = self.newest
            if newest is not None and response.policy_version < newest[0]:
                # A replica restarted while the newest version was published: it loads it before use.
                logger.warning(
                    "a rollout replica served policy version %d < %d; reloading",
                    response.policy_version,
                    newest[0],
                )
                self.load_weights(*newest)
                response = self.pool.call("Generate", request)
            return indices, response

        results: list[list[SampledAction]] = [[] for _ in prompts]
        for indices, response in self._executor.map(lambda item: run(*item), enumerate(shards)):
            for index, group in zip(indices, response.groups, strict=True):
                results[index] = [
                    SampledAction(
                        token_ids=require_tensor(c.token_ids, "token_ids").tolist(),
                        logprobs=require_tensor(c.logprobs, "logprobs").tolist(),
                        policy_version=response.policy_version,
                    )
                    for c in group.completions
                ]
        return results

    def load_weights(self, version: int, path: str) -> dict[str, Any]:
        """Every replica loads ``version``; returns per-replica responses (or errors)."""
        self.newest = (version, path)
        return self.pool.call_each("LoadWeights", rollout_pb2.LoadWeightsRequest(version=version, path=path))

    def info(self) -> dict[str, Any]:
        response = self.pool.call("Info", common_pb2.ServiceInfoRequest())
        return {"weights_version": response.weights_version, **json.loads(response.details_json or "{}")}


class EnvironmentClient:
    def __init__(self, pool: ReplicaPool[Any]) -> None:
        self.pool = pool

    def sample_tasks(self, n: int, split: str, seed: int) -> list[Task]:
        response = self.pool.call(
            "SampleTasks", environment_pb2.SampleTasksRequest(n=n, split=split, seed=seed)
        )
        return [task_from_proto(t) for t in response.tasks]

    def reset(self, tasks: Sequence[Task]) -> list[EpisodeState]:
        response = self.pool.call(
            "Reset", environment_pb2.ResetRequest(tasks=[task_to_proto(t) for t in tasks])
        )
        return [episode_from_proto(s) for s in response.states]

    def step(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]:
        request = environment_pb2.StepRequest(
            items=[environment_pb2.StepItem(state=episode_to_proto(s), action=a) for s, a in items]
        )
        response = self.pool.call("Step", request)
        return [
            StepResult(episode_from_proto(r.state), r.observation, r.reward, r.done, r.diagnostic)
            for r in response.results
        ]

    def info(self) -> dict[str, Any]:
        response = self.pool.call("Info", common_pb2.ServiceInfoRequest())
        details: dict[str, Any] = json.loads(response.details_json or "{}")
        return details


value_evaluator_stub = bytes_request_stub(
    value_pb2_grpc.ValueEvaluatorStub,
    "lecritique.v1.ValueEvaluator",
    {"Evaluate": value_pb2.EvaluateResponse},
)
"""The stub a :class:`ValueEvaluatorClient`'s pool needs: Evaluate takes the request serialised."""

policy_trainer_stub = bytes_request_stub(
    policy_pb2_grpc.PolicyTrainerStub, "lecritique.v1.PolicyTrainer", {"Train": policy_pb2.TrainResponse}
)
"""The stub a :class:`PolicyTrainerClient`'s pool needs: Train takes the request serialised."""


class ValueEvaluatorClient:
    def __init__(self, pool: ReplicaPool[Any]) -> None:
        self.pool = pool

    def evaluate(
        self, queries: Sequence[CriticQuery], prompt_texts: Sequence[str], actor: ActorInfo
    ) -> tuple[list[np.ndarray], int, dict[str, float]]:
        """Values of every query's trajectory (the critic inputs of :func:`lecritique.critics.inputs.critic_queries`)."""
        request = value_pb2.EvaluateRequest(
            actor_description=actor.description, actor_reward_average=actor.reward_average
        )
        for query, prompt in zip(queries, prompt_texts, strict=True):
            item = request.inputs.add(context_text=query.context_text, prompt_text=prompt)
            for peer in query.peers:
                item.peers.add(trajectory_id=peer.trajectory_id, summary=peer.summary, reward=peer.reward)
        data = serialize_with_trajectories(request, "trajectories", [query.trajectory for query in queries])
        response = self.pool.call("Evaluate", data)
        answered = ragged_from_proto(response.values, "values", len(queries), "float32")
        values = [value for value in answered if value is not None]
        if len(values) != len(queries):
            raise ValueError(
                f"the value evaluator answered {len(values)} value arrays for {len(queries)} trajectories"
            )
        return values, int(response.value_version), {str(k): float(v) for k, v in response.stats.items()}

    def served_version(self) -> int:
        """The critic version one replica serves now (its Info)."""
        return int(self.pool.call("Info", common_pb2.ServiceInfoRequest()).weights_version)


class ValueTrainerClient:
    def __init__(self, pool: ReplicaPool[Any]) -> None:
        self.pool = pool

    def status(self) -> value_pb2.ValueTrainerStatus:
        status: value_pb2.ValueTrainerStatus = self.pool.call("Status", value_pb2.ValueTrainerStatusRequest())
        return status


class PolicyTrainerClient:
    def __init__(self, pool: ReplicaPool[Any]) -> None:
        self.pool = pool

    def train(self, step: int, trajectories: Sequence[Trajectory]) -> policy_pb2.TrainResponse:
        data = serialize_with_trajectories(policy_pb2.TrainRequest(step=step), "trajectories", trajectories)
        response: policy_pb2.TrainResponse = self.pool.call("Train", data)
        return response

    def status(self) -> policy_pb2.PolicyTrainerStatus:
        status: policy_pb2.PolicyTrainerStatus = self.pool.call(
            "Status", policy_pb2.PolicyTrainerStatusRequest()
        )
        return status


@dataclass
class ServiceClients:
    rollout: RolloutClient
    environment: EnvironmentClient
    policy_trainer: PolicyTrainerClient
    value_evaluator: ValueEvaluatorClient | None = None
    value_trainer: ValueTrainerClient | None = None

    @classmethod
    def connect(
        cls,
        *,
        rollout: Sequence[str],
        environment: Sequence[str],
        policy_trainer: Sequence[str],
        value_evaluator: Sequence[str] = (),
        value_trainer: Sequence[str] = (),
        max_message_bytes: int | None = None,
        deadline_seconds: float = 600.0,
        retry_seconds: float = 300.0,
    ) -> ServiceClients:
        """Pools of every service: calls carry ``deadline_seconds``; a service that is down is retried
        for ``retry_seconds``, except the value evaluator (never waited on: the batch degrades)."""
        options: dict[str, Any] = {"deadline_seconds": deadline_seconds}
        if max_message_bytes is not None:
            options["max_message_bytes"] = max_message_bytes
        retried = {**options, "retry_seconds": retry_seconds}
        return cls(
            rollout=RolloutClient(ReplicaPool("rollout", rollout, rollout_pb2_grpc.RolloutStub, **retried)),
            environment=EnvironmentClient(
                ReplicaPool(
                    "environment-verifier",
                    environment,
                    environment_pb2_grpc.EnvironmentVerifierStub,
                    **retried,
                )
            ),
            policy_trainer=PolicyTrainerClient(
                ReplicaPool("policy-trainer", policy_trainer, policy_trainer_stub, **retried)
            ),
            value_evaluator=ValueEvaluatorClient(
                ReplicaPool("value-evaluator", value_evaluator, value_evaluator_stub, **options)
            )
            if value_evaluator
            else None,
            value_trainer=ValueTrainerClient(
                ReplicaPool("value-trainer", value_trainer, value_pb2_grpc.ValueTrainerStub, **options)
            )
            if value_trainer
            else None,
        )

    def close(self) -> None:
        for client in (
            self.rollout,
            self.environment,
            self.policy_trainer,
            self.value_evaluator,
            self.value_trainer,
        ):
            if client is not None:
                client.pool.close()
