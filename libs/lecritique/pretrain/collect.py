"""Rollouts for value pretraining: every policy plays its tasks, the critic's contexts are attached.

Each policy plays like the live run's rollout stage (``rollout.group_size`` episodes per task,
a group's first actions sampled together, the spec's sampling and template) through the local
player ``critic-eval`` uses; the critic's privileged context of every trajectory comes from
:func:`lecritique.critics.inputs.critic_queries`, the function the orchestrator's evaluation
stage calls, and is encoded with the spec policy's tokenizer, as in the live run: no train/serve
skew. A policy's rollouts are cached on disk (``rollouts/policy-NN.bin`` and its key), so a
rerun with the same ``--out`` plays nothing again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.config.experiment import ExperimentSpec
from lecritique.critic_eval.run import local_player
from lecritique.critics.inputs import attempt_of, critic_queries
from lecritique.critics.prompts import describe_actor
from lecritique.critics.specs import DiscriminativeCriticSpec
from lecritique.critics.types import ActorInfo
from lecritique.envs import build_environment
from lecritique.models.policy import load_tokenizer
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

GROUP_ID_STRIDE = 1_000_000_000
"""Group ids of policy ``i`` start at ``i * GROUP_ID_STRIDE``: groups never mix across policies."""

TASK_SEED_OFFSET = 999_983
"""Policy ``i`` samples its tasks with seed ``seed * 1_000_003 + TASK_SEED_OFFSET + i``: draws apart
from the live run's batches (seed ``seed * 1_000_003 + cursor``) for its first 999,983 steps."""


@dataclass(frozen=True)
class PolicyRollouts:
    """One policy's cached rollouts: what played and the trajectories with critic contexts."""

    policy: str
    trajectories: list[Trajectory]
    mean_reward: float


def collection_key(
    spec: ExperimentSpec,
    critic: DiscriminativeCriticSpec,
    policies: Sequence[str],
    index: int,
    tasks: int,
    seed: int,
) -> str:
    """What a policy's cached rollouts depend on (the spec policy's tokenizer encodes every context)."""
    parts = {
        "policy": policies[index],
        "index": index,
        "tokenizer": spec.policy.path,
        "tasks": tasks,
        "seed": seed,
        "environment": spec.environment.model_dump(mode="json"),
        "rollout": spec.rollout.model_dump(mode="json", exclude={"replicas", "tasks_per_step"}),
        "template": spec.policy.template.model_dump(mode="json"),
        "context": critic.model_dump(
            mode="json",
            include={"context", "privileged_key", "max_context_chars", "sibling_chars", "max_context_tokens"},
        ),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def write_trajectories(path: Path, trajectories: Sequence[Trajectory]) -> None:
    """Length-prefixed :meth:`Trajectory.to_bytes` records, written atomically."""
    partial = path.with_suffix(".partial")
    with partial.open("wb") as file:
        for trajectory in trajectories:
            data = trajectory.to_bytes()
            file.write(struct.pack("<Q", len(data)))
            file.write(data)
    partial.replace(path)


def read_trajectories(path: Path) -> list[Trajectory]:
    data = memoryview(path.read_bytes())
    trajectories, offset = [], 0
    while offset < len(data):
        (size,) = struct.unpack_from("<Q", data, offset)
        trajectories.append(Trajectory.from_bytes(data[offset + 8 : offset + 8 + size]))
        offset += 8 + size
    return trajectories


def check_same_tokenizer(base: Any, policy: str) -> None:
    """The critic reads token ids encoded by the spec policy's tokenizer: every policy must share it."""
    other = load_tokenizer(Path(policy))
    probe = "r1c2=3 | 17 + 25 = 42\nThe answer is (B)."
    if len(other) != len(base) or other.encode(probe) != base.encode(probe):
        raise ValueError(
            f"policies: {policy!r} does not share the spec policy's tokenizer (its token ids differ)"
        )


def play_policy(
    spec: ExperimentSpec,
    critic: DiscriminativeCriticSpec,
    policy: str,
    index: int,
    tasks: int,
    seed: int,
    tokenizer: Any,
) -> PolicyRollouts:
    """``tasks`` train-split tasks played by ``policy``, each trajectory carrying its critic context."""
    environment = build_environment(spec.environment)
    player, engine = local_player(
        Path(policy), spec.rollout.engine, spec.policy, spec.rollout.sampling, environment, seed
    )
    try:
        sampled = environment.sample_tasks(tasks, "train", seed * 1_000_003 + TASK_SEED_OFFSET + index)
        records = player.play_groups(sampled, spec.rollout.group_size, first_group_id=index * GROUP_ID_STRIDE)
    finally:
        engine.close()
    trajectories = [r.trajectory(f"p{index}-{r.group_id}-{r.member}") for r in records]
    conditioning = critic.actor_conditioning()
    actor = ActorInfo(conditioning.description or describe_actor(policy), conditioning.initial_reward_average)
    queries = critic_queries(
        critic, [attempt_of(r, t) for r, t in zip(records, trajectories, strict=True)], tokenizer, actor
    )
    shown = [query.trajectory for query in queries]
    return PolicyRollouts(policy, shown, float(np.mean([t.reward for t in shown])))


def collect(
    spec: ExperimentSpec,
    critic: DiscriminativeCriticSpec,
    policies: Sequence[str],
    tasks: int,
    seed: int,
    folder: Path,
    progress: Any = None,
) -> list[PolicyRollouts]:
    """Every policy's rollouts, from the cache in ``folder`` where the key matches, else played."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(Path(str(spec.policy.path)))
    for policy in policies:
        if Path(policy) != Path(str(spec.policy.path)).resolve():
            check_same_tokenizer(tokenizer, policy)
    task = progress.add_task("collecting rollouts", total=len(policies)) if progress is not None else None
    collected = []
    for index, policy in enumerate(policies):
        data, key_file = folder / f"policy-{index:02d}.bin", folder / f"policy-{index:02d}.json"
        key = collection_key(spec, critic, policies, index, tasks, seed)
        known = json.loads(key_file.read_text()) if key_file.is_file() and data.is_file() else {}
        if known.get("key") == key:
            rollouts = PolicyRollouts(policy, read_trajectories(data), float(known["mean_reward"]))
            logger.info("policy %d (%s): %d cached trajectories", index, policy, len(rollouts.trajectories))
        else:
            rollouts = play_policy(spec, critic, policy, index, tasks, seed, tokenizer)
            write_trajectories(data, rollouts.trajectories)
            key_file.write_text(
                json.dumps({"key": key, "policy": policy, "mean_reward": rollouts.mean_reward})
            )
            logger.info(
                "policy %d (%s): played %d trajectories, mean reward %.3f",
                index,
                policy,
                len(rollouts.trajectories),
                rollouts.mean_reward,
            )
        collected.append(rollouts)
        if task is not None:
            progress.advance(task)
    return collected
