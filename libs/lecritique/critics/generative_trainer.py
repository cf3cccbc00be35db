"""Training the generative critic with REINFORCE on the rule-based reward of GenAC §5.2.

For each sampled state s of a replay batch, the critic (its current weights, through the same
engine interface as rollout) generates ``samples_per_state`` completions z with parsed values v;
each earns R_v = 1 - (r - v)^2, or 0 when the score does not parse, where r is the state's return
target: the trajectory's Monte-Carlo return (GAE lambda = 1, as GenAC following VC-PPO), or a
given per-token target at the state's token. No KL penalty. The update is the policy gradient
-sum_t (R_v - b) log pi(z_t | s, z_<t), token-normalised, applied by the policy trainer's machinery
(:class:`~lecritique.training.PolicyTrainer` with PPO-clip and kl_coef = 0: the samples are from
the current weights, so the ratio is 1 and the clipped surrogate is exactly REINFORCE).

>>> trainer = GenerativeCriticTrainer.from_policy("weights/policy/00000000", config, policy_dir=...)
>>> metrics = trainer.train_step(trajectories)     # critic reward, parse failures, value MSE
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.advantages import explained_variance
from lecritique.critics.config import GenerativeCriticConfig
from lecritique.critics.generative import critic_sampling, state_prompts
from lecritique.critics.icc import ACTOR_KEY, REWARD_AVERAGE_KEY
from lecritique.critics.llm import EngineGenerator
from lecritique.critics.prompts import scored_text
from lecritique.critics.scoring import critic_reward, parse_score
from lecritique.critics.states import trajectory_states
from lecritique.critics.types import ActorInfo
from lecritique.engines.hf import HFEngine
from lecritique.models.policy import load_tokenizer
from lecritique.training.config import PolicyTrainerConfig, PPOClipLossConfig
from lecritique.training.policy_trainer import PolicyTrainer
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore

logger = logging.getLogger(__name__)


def actor_info(trajectory: Trajectory, config: GenerativeCriticConfig) -> ActorInfo:
    """The In-Context Conditioning the evaluator used for ``trajectory`` (recorded in its metadata)."""
    return ActorInfo(
        description=str(trajectory.metadata.get(ACTOR_KEY, "")),
        reward_average=float(trajectory.metadata.get(REWARD_AVERAGE_KEY, config.initial_reward_average)),
    )


def reinforce_advantages(rewards: np.ndarray, config: GenerativeCriticConfig) -> np.ndarray:
    """Advantages of [states, samples] critic rewards under the configured baseline."""
    rewards = rewards.astype(np.float64)
    if config.baseline == "none":
        return rewards
    baseline = rewards.mean() if config.baseline == "batch_mean" else rewards.mean(axis=1, keepdims=True)
    advantages: np.ndarray = rewards - baseline
    return advantages


class GenerativeCriticTrainer:
    """A causal-LM critic, trained by REINFORCE; saves and publishes like the other trainers."""

    role = "critic"

    def __init__(
        self, model_dir: str | Path, config: GenerativeCriticConfig, *, policy_dir: str | Path, seed: int = 0
    ) -> None:
        self.config = config
        self.learner = PolicyTrainer(
            model_dir,
            PolicyTrainerConfig(
                loss=PPOClipLossConfig(kl_coef=0.0),
                optimizer=config.optimizer,
                micro_batch_tokens=config.micro_batch_tokens,
                dtype=config.dtype,
                device=config.device,
            ),
            budget_name="critic.micro_batch_tokens",
        )
        self.tokenizer = load_tokenizer(model_dir)
        self.policy_tokenizer = load_tokenizer(policy_dir)
        # Samples come from the weights being trained: the engine wraps the learner's own model.
        self.generator = EngineGenerator(
            HFEngine.from_model(self.learner.model, self.tokenizer), self.tokenizer
        )
        self.rng = np.random.default_rng(seed)
        self.seed = seed

    @classmethod
    def from_policy(
        cls, policy_dir: str | Path, config: GenerativeCriticConfig, seed: int = 0
    ) -> GenerativeCriticTrainer:
        """A fresh critic: ``config.model_path`` if set, else a copy of the policy (LM head kept)."""
        return cls(config.model_path or policy_dir, config, policy_dir=policy_dir, seed=seed)

    @classmethod
    def load(
        cls, critic_dir: str | Path, config: GenerativeCriticConfig, *, policy_dir: str | Path, seed: int = 0
    ) -> GenerativeCriticTrainer:
        """Resume from a published critic version."""
        return cls(critic_dir, config, policy_dir=policy_dir, seed=seed)

    @property
    def steps(self) -> int:
        return self.learner.steps

    def save(self, directory: str | Path) -> Path | None:
        return self.learner.save(directory)

    def publish(self, store: WeightStore, keep_last: int | None = None) -> int | None:
        return self.learner.publish(store, role=self.role, keep_last=keep_last)

    def train_step(self, trajectories: Sequence[Trajectory], targets: Any = None) -> dict[str, float]:
        """One REINFORCE update on states sampled from ``trajectories``.

        ``targets``: None for Monte-Carlo returns, or per-token targets (one row per trajectory)
        read at each state's token. Metrics: ``loss``, ``critic_reward``, ``parse_failure_rate``,
        ``value_mse`` and ``explained_variance`` of the parsed values against the targets.
        """
        started = time.perf_counter()
        if not trajectories:
            raise ValueError("the batch is empty: a critic update needs at least one trajectory")
        if targets is not None and len(targets) != len(trajectories):
            raise ValueError(f"targets has {len(targets)} rows for {len(trajectories)} trajectories")
        prompts, state_targets = self._state_prompts(trajectories, targets)
        chosen = np.arange(len(prompts))
        limit = self.config.max_train_states
        if limit is not None and len(prompts) > limit:
            chosen = np.sort(self.rng.choice(len(prompts), size=limit, replace=False))
        ids = [self.tokenizer.encode(prompts[i], add_special_tokens=True) for i in chosen]
        samples = self.config.samples_per_state
        batch = self.generator.generate(
            ids, critic_sampling(self.config, seed=self.seed * 1_000_003 + self.steps), n=samples
        )
        parsed = [
            [parse_score(scored_text(self.config, c.text), self.config.score_tag) for c in group]
            for group in batch.completions
        ]
        targets_chosen = np.asarray([state_targets[i] for i in chosen], dtype=np.float64)
        rewards = np.array(
            [
                [critic_reward(p, target) for p in group]
                for group, target in zip(parsed, targets_chosen, strict=True)
            ]
        )
        metrics = self.learner.train_step(
            self._sample_trajectories(batch, rewards, reinforce_advantages(rewards, self.config))
        )
        metrics.update(_score_metrics(parsed, targets_chosen, rewards))
        metrics.update(
            {
                "policy_loss": metrics["loss"],
                "states": float(len(chosen)),
                "truncated_prompts": float(batch.truncated_prompts),
                "step_seconds": time.perf_counter() - started,
            }
        )
        return metrics

    def _state_prompts(
        self, trajectories: Sequence[Trajectory], targets: Any
    ) -> tuple[list[str], list[float]]:
        """The critic prompt of every state of every trajectory, and each state's regression target."""
        segments = self.config.segments
        prompts: list[str] = []
        state_targets: list[float] = []
        for row, trajectory in enumerate(trajectories):
            text = trajectory_states(
                trajectory, self.policy_tokenizer, segments.rule, segments.max_segments, segments.max_length
            )
            prompts += state_prompts(self.config, text, actor_info(trajectory, self.config))
            for state in text.states:
                target = (
                    trajectory.reward
                    if targets is None
                    else float(np.asarray(targets[row])[state.token_index])
                )
                state_targets.append(target)
        if not prompts:
            raise ValueError("the batch has no policy tokens, hence no states to train the critic on")
        return prompts, state_targets

    def _sample_trajectories(
        self, batch: Any, rewards: np.ndarray, advantages: np.ndarray
    ) -> list[Trajectory]:
        """Every critic completion as a one-turn trajectory with its REINFORCE advantage."""
        out = []
        for row, (group, prompt_ids) in enumerate(zip(batch.completions, batch.prompts, strict=True)):
            for sample, completion in enumerate(group):
                length = len(completion.token_ids)
                out.append(
                    Trajectory(
                        trajectory_id=f"critic-{self.steps}-{row}-{sample}",
                        task_id="critic",
                        group_id=row,
                        prompt_ids=np.asarray(prompt_ids),
                        token_ids=np.asarray(completion.token_ids),
                        policy_mask=np.ones(length, dtype=bool),
                        logprobs=np.asarray(completion.logprobs),
                        step_ids=np.zeros(length, dtype=np.int32),
                        reward=float(rewards[row, sample]),
                        policy_version=self.steps,
                        advantages=np.full(length, advantages[row, sample], dtype=np.float32),
                    )
                )
        return out


def _score_metrics(parsed: list[list[Any]], targets: np.ndarray, rewards: np.ndarray) -> dict[str, float]:
    """How the parsed scores compare with the targets (over the completions that parsed)."""
    parsed_values = np.array([[np.nan if p.value is None else p.value for p in group] for group in parsed])
    ok = ~np.isnan(parsed_values)
    pairs_target = np.broadcast_to(targets[:, None], parsed_values.shape)[ok]
    pairs_value = parsed_values[ok]
    return {
        "critic_reward": float(rewards.mean()),
        "parse_failure_rate": float(1.0 - ok.mean()),
        "value_mse": float(np.mean((pairs_value - pairs_target) ** 2)) if pairs_value.size else float("nan"),
        "explained_variance": explained_variance(pairs_value, pairs_target)
        if pairs_value.size
        else float("nan"),
        "value_mean": float(pairs_value.mean()) if pairs_value.size else float("nan"),
        "target_mean": float(targets.mean()),
        "samples": float(rewards.size),
    }
