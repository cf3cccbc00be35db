"""CriticTrainer: initialisation from the policy, learning a simple value, targets, save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from lecritique.advantages import AdvantageBatch, GAEEstimator, explained_variance
from lecritique.training.config import CriticTrainerConfig, OptimizerConfig
from lecritique.training.critic_trainer import CriticTrainer
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore
from tests.unit.training.training_helpers import VOCAB_SIZE, make_trajectory


def _prompt_class_task(count: int, seed: int, critic_context: bool = True) -> list[Trajectory]:
    """Reward 1 exactly when the prompt's tokens come from the lower half of the vocabulary.

    The value is then known from h_0 on, and learnable from a few dozen episodes.
    """
    rng = np.random.default_rng(seed)
    trajectories = []
    for index in range(count):
        context_len = index % 3 if critic_context else 0
        trajectory = make_trajectory(
            rng, index, prompt_len=3, num_tokens=4, env_tokens=1, critic_context_len=context_len
        )
        succeeds = index % 2 == 0
        low, high = (1, VOCAB_SIZE // 2) if succeeds else (VOCAB_SIZE // 2, VOCAB_SIZE)
        trajectory.prompt_ids = rng.integers(low, high, 3).astype(np.int32)
        trajectory.reward = float(succeeds)
        trajectories.append(trajectory)
    return trajectories


def _returns_on_policy_tokens(trajectories: list[Trajectory]) -> tuple[np.ndarray, np.ndarray]:
    """Returns on every policy token, and the policy mask over all tokens (to select from flat values)."""
    return np.concatenate([np.full(t.num_policy_tokens, t.reward) for t in trajectories]), np.concatenate(
        [t.policy_mask for t in trajectories]
    )


def test_critic_starts_from_the_policy_backbone_with_a_fresh_head(tiny_llama_dir: Path) -> None:
    critic = CriticTrainer.from_policy(tiny_llama_dir)
    policy = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir))
    policy_weights = policy.model.state_dict()
    critic_weights = critic.model.model.state_dict()
    assert policy_weights.keys() == critic_weights.keys()
    for name, weight in policy_weights.items():
        torch.testing.assert_close(critic_weights[name], weight)
    assert critic.model.score.weight.shape == (1, policy.config.hidden_size)
    assert critic.config.optimizer.lr == 1e-5  # Le Critique Table 2
    assert critic.config.loss == "bce"


def test_critic_learns_the_value_and_explained_variance_rises(tiny_llama_dir: Path) -> None:
    train = _prompt_class_task(32, seed=0, critic_context=False)
    held_out = _prompt_class_task(32, seed=1, critic_context=False)
    config = CriticTrainerConfig(optimizer=OptimizerConfig(lr=1e-2, weight_decay=0.0))
    critic = CriticTrainer.from_policy(tiny_llama_dir, config)
    returns, policy_mask = _returns_on_policy_tokens(held_out)

    def held_out_ev() -> float:
        values = np.concatenate(critic.predict(held_out))
        return explained_variance(values[policy_mask], returns)

    before = held_out_ev()
    history = [critic.train_step(train) for _ in range(20)]
    after = held_out_ev()
    assert history[0]["explained_variance"] < 0.1
    assert history[-1]["explained_variance"] > 0.8
    assert history[-1]["loss"] < history[0]["loss"] * 0.5
    # It learned the rule, not the episodes: the value generalises to unseen prompts.
    assert before < 0.1
    assert after > 0.5
    assert history[0]["trained_tokens"] == sum(t.num_policy_tokens for t in train)


def test_train_step_reports_loss_and_explained_variance_of_the_pre_update_predictions(
    tiny_llama_dir: Path,
) -> None:
    trajectories = _prompt_class_task(8, seed=2)
    critic = CriticTrainer.from_policy(
        tiny_llama_dir, CriticTrainerConfig(optimizer=OptimizerConfig(lr=1e-2))
    )
    values = critic.predict(trajectories)
    flat_values = np.concatenate([v[t.policy_mask] for v, t in zip(values, trajectories, strict=True)])
    returns = np.concatenate([np.full(t.num_policy_tokens, t.reward) for t in trajectories])
    probabilities = np.clip(flat_values.astype(np.float64), 1e-7, 1 - 1e-7)
    expected_bce = float(
        -np.mean(returns * np.log(probabilities) + (1 - returns) * np.log(1 - probabilities))
    )
    metrics = critic.train_step(trajectories)
    assert metrics["loss"] == pytest.approx(expected_bce, rel=1e-4)
    assert metrics["explained_variance"] == pytest.approx(
        explained_variance(flat_values, returns), rel=1e-4, abs=1e-5
    )
    assert metrics["value_mean"] == pytest.approx(float(flat_values.mean()), rel=1e-5)
    after = np.concatenate(
        [v[t.policy_mask] for v, t in zip(critic.predict(trajectories), trajectories, strict=True)]
    )
    assert not np.allclose(after, flat_values)


def test_mse_critic_trains_on_explicit_gae_targets(tiny_llama_dir: Path) -> None:
    trajectories = _prompt_class_task(6, seed=3)
    config = CriticTrainerConfig(loss="mse", optimizer=OptimizerConfig(lr=1e-2))
    critic = CriticTrainer.from_policy(tiny_llama_dir, config)
    values = critic.predict(trajectories)
    width = max(t.token_ids.shape[0] for t in trajectories)
    padded_values = np.zeros((len(trajectories), width))
    mask = np.zeros((len(trajectories), width), dtype=bool)
    for row, (value, trajectory) in enumerate(zip(values, trajectories, strict=True)):
        padded_values[row, : value.shape[0]] = value
        mask[row, : value.shape[0]] = trajectory.policy_mask
    batch = AdvantageBatch(
        rewards=np.array([t.reward for t in trajectories]),
        group_ids=np.array([t.group_id for t in trajectories]),
        mask=mask,
        values=padded_values,
    )
    targets = GAEEstimator(lambda_target=0.5).value_targets(batch)
    expected = float(np.mean(((padded_values - targets) ** 2)[mask]))
    metrics = critic.train_step(trajectories, targets)
    assert metrics["loss"] == pytest.approx(expected, rel=1e-4)
    # With lambda < 1 the targets differ from the Monte-Carlo returns: the loss proves they were used.
    monte_carlo = float(np.mean(((padded_values - batch.rewards[:, None]) ** 2)[mask]))
    assert abs(expected - monte_carlo) > 1e-3


def test_predict_aligns_values_with_trajectory_tokens_and_survives_publish_and_load(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    trajectories = _prompt_class_task(5, seed=4)
    critic = CriticTrainer.from_policy(
        tiny_llama_dir, CriticTrainerConfig(optimizer=OptimizerConfig(lr=1e-2))
    )
    critic.train_step(trajectories)
    values = critic.predict(trajectories)
    assert [v.shape for v in values] == [t.token_ids.shape for t in trajectories]
    assert all(v.dtype == np.float32 and np.all((v > 0) & (v < 1)) for v in values)
    # Micro-batching in predict does not change the values.
    small = CriticTrainer(critic.model, CriticTrainerConfig(micro_batch_tokens=1))
    for one, other in zip(values, small.predict(trajectories), strict=True):
        np.testing.assert_allclose(other, one, rtol=1e-5, atol=1e-6)
    store = WeightStore(tmp_path / "weights")
    assert critic.publish(store) == 0
    latest = store.latest("critic")
    assert latest is not None
    loaded = CriticTrainer.load(latest[1])
    for one, other in zip(values, loaded.predict(trajectories), strict=True):
        np.testing.assert_allclose(other, one, rtol=1e-5, atol=1e-6)


def test_bad_critic_inputs_raise_clear_errors(tiny_llama_dir: Path) -> None:
    trajectories = _prompt_class_task(2, seed=5)
    critic = CriticTrainer.from_policy(tiny_llama_dir)
    with pytest.raises(ValueError, match="targets must lie in \\[0, 1\\]"):
        critic.train_step(trajectories, [np.full(4, 2.0), np.full(4, 2.0)])
    with pytest.raises(ValueError, match="targets has 1 rows for 2 trajectories"):
        critic.train_step(trajectories, [np.zeros(4)])
    no_policy = _prompt_class_task(1, seed=6)
    no_policy[0].policy_mask[:] = False
    with pytest.raises(ValueError, match="no policy tokens"):
        critic.train_step(no_policy)
    assert critic.steps == 0
    with pytest.raises(ValueError, match="one label"):
        CriticTrainer(AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir)))
