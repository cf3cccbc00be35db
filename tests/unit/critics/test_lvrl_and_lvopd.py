"""LVRL anchoring and normalisation on frozen-critic values; LVOPD's gates and distillation term."""

import numpy as np
import pytest
import torch

from lecritique.advantages import AdvantageBatch, LVRLEstimator, get_estimator
from lecritique.config import parse_spec
from lecritique.config.experiment import SpecError
from lecritique.critics.prompts import parse_state_values
from lecritique.critics.segments import expand_segment_values
from lecritique.training.collate import collate_policy
from lecritique.training.config import DistillationConfig, PolicyTrainerConfig
from lecritique.training.distillation import collate_gates, lvopd_gates, reverse_kl_per_token
from lecritique.training.policy_trainer import PolicyTrainer
from lecritique.trajectory import Trajectory

# Two 3-turn trajectories of one group (turn = 2 tokens), one solved and one failed, and what a
# frozen LLM answered for their states 0..2.
STEPS = np.array([0, 0, 1, 1, 2, 2])
ANSWERS = ["0: 0.9\n1: 0.4\n2: 0.8", "0: 0.6\n1: 0.7\n2: 0.2"]
REWARDS = [1.0, 0.0]


def frozen_values(answer):
    states = parse_state_values(answer, 3)
    return expand_segment_values([0, 2, 4], states, 6)


def group(values=True):
    return [
        Trajectory(
            trajectory_id=f"t{i}",
            task_id="task",
            group_id=7,
            prompt_ids=np.array([2, 5]),
            token_ids=np.arange(4, 10),
            policy_mask=np.ones(6, bool),
            logprobs=np.full(6, -1.0),
            step_ids=STEPS,
            reward=reward,
            policy_version=0,
            values=frozen_values(answer) if values else None,
            advantages=np.zeros(6),
        )
        for i, (answer, reward) in enumerate(zip(ANSWERS, REWARDS, strict=True))
    ]


def lvrl_batch(trajectories):
    return AdvantageBatch(
        rewards=np.array([t.reward for t in trajectories]),
        group_ids=np.array([t.group_id for t in trajectories]),
        mask=np.stack([t.policy_mask for t in trajectories]),
        values=np.stack([t.values for t in trajectories]),
        step_ids=np.stack([t.step_ids for t in trajectories]),
    )


def test_lvrl_anchors_the_first_state_to_the_group_success_rate_and_the_last_to_the_reward():
    steps = LVRLEstimator().step_advantages(lvrl_batch(group()))
    # V(s_0) := mu_G = 0.5 (the LLM's 0.9 / 0.6 for state 0 are replaced), V(s_3) := R.
    assert steps[0] == pytest.approx(np.diff([0.5, 0.4, 0.8, 1.0]))
    assert steps[1] == pytest.approx(np.diff([0.5, 0.7, 0.2, 0.0]))


def test_lvrl_normalises_step_advantages_across_the_group_and_shares_them_within_a_step():
    advantages = get_estimator("lvrl").compute(lvrl_batch(group()))
    per_step = advantages[:, ::2]
    assert np.array_equal(per_step, advantages[:, 1::2])  # both tokens of a step share it
    assert per_step.mean() == pytest.approx(0.0, abs=1e-6)
    assert per_step.std() == pytest.approx(1.0, abs=1e-4)
    raw = np.concatenate(LVRLEstimator().step_advantages(lvrl_batch(group())))
    assert per_step.ravel() == pytest.approx((raw - raw.mean()) / raw.std(), abs=1e-4)


def test_lvopd_gate_value_decrease_selects_the_actions_whose_value_drops():
    gates = lvopd_gates(group(), DistillationConfig(teacher="unused"))
    # Solved: steps change by -0.1, +0.4, +0.2 -> only step 0. Failed: +0.2, -0.5, -0.2 -> steps 1, 2.
    assert gates[0].tolist() == [True, True, False, False, False, False]
    assert gates[1].tolist() == [False, False, True, True, True, True]
    strict = lvopd_gates(group(), DistillationConfig(teacher="unused", value_threshold=-0.3))
    assert strict[0].tolist() == [False] * 6
    assert strict[1].tolist() == [False, False, True, True, False, False]


def test_lvopd_other_gates_and_missing_values():
    failure = lvopd_gates(group(), DistillationConfig(teacher="unused", gate="trajectory_failure"))
    assert [g.tolist() for g in failure] == [[False] * 6, [True] * 6]
    every = lvopd_gates(group(values=False), DistillationConfig(teacher="unused", gate="none"))
    assert all(g.all() for g in every)
    with pytest.raises(ValueError, match="'t0'.*no values"):
        lvopd_gates(group(values=False), DistillationConfig(teacher="unused"))


def test_gates_line_up_with_the_policy_batch_next_token_columns():
    trajectories = group()
    gates = lvopd_gates(trajectories, DistillationConfig(teacher="unused"))
    gate_tensor = collate_gates(trajectories, gates)
    batch = collate_policy(trajectories)
    assert gate_tensor.shape == batch.loss_mask.shape
    assert not (gate_tensor & ~batch.loss_mask).any()
    # Column P + t - 1 predicts trajectory token t (P = 2 prompt tokens).
    assert torch.nonzero(gate_tensor[0]).ravel().tolist() == [1, 2]


def test_reverse_kl_is_zero_for_identical_models_and_positive_otherwise():
    logits = torch.randn(2, 5, 11)
    assert reverse_kl_per_token(logits, logits).abs().max() < 1e-6
    assert (reverse_kl_per_token(logits, logits.flip(-1)) > 0).all()


def test_distillation_moves_gated_tokens_toward_the_teacher(ascii_model, tmp_path):
    from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
    from tests.unit.critics.conftest import ASCII

    architecture = TinyArchitecture(
        hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128, max_positions=512
    )
    teacher = write_random_tiny_policy(tmp_path / "teacher", ASCII, seed=11, architecture=architecture)
    config = PolicyTrainerConfig(
        optimizer={"lr": 1e-3, "weight_decay": 0.0},
        distillation=DistillationConfig(teacher=str(teacher), pg_coef=0.0, gate="value_decrease"),
    )
    trainer = PolicyTrainer(ascii_model, config)
    trajectories = group()
    gates = collate_gates(trajectories, lvopd_gates(trajectories, config.distillation))
    batch = collate_policy(trajectories)

    def kl_by_gate():
        with torch.no_grad():
            student = trainer.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
            reference = trainer.distiller.teacher(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask
            ).logits
        kl = reverse_kl_per_token(student[:, :-1], reference[:, :-1])
        return kl[gates].mean().item()

    before = kl_by_gate()
    metrics = [trainer.train_step(trajectories) for _ in range(10)]
    assert metrics[0]["distill_gated_fraction"] == pytest.approx(6 / 12)
    assert metrics[0]["distill_kl"] == pytest.approx(before, rel=1e-4)
    assert kl_by_gate() < 0.25 * before


def test_spec_rejects_a_value_gate_without_a_critic(tiny_spec):
    spec = {
        **tiny_spec,
        "estimator": {"name": "rloo"},
        "policy_trainer": {"distillation": {"teacher": "/models/t"}},
    }
    with pytest.raises(SpecError, match="distillation.gate 'value_decrease' needs a critic"):
        parse_spec(spec)
    spec["policy_trainer"]["distillation"]["gate"] = "trajectory_failure"
    assert parse_spec(spec).policy_trainer.distillation.gate == "trajectory_failure"


@pytest.fixture
def tiny_spec():
    return {
        "name": "x",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"tiny": "sudoku-mini"},
    }
