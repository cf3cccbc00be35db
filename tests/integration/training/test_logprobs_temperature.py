"""The temperature the trainer divides by is the one recorded with the logprobs: no second setting.

Sampling at 0.7 with the HF engine through the episode player, the trainer's first-step ratio is
exactly 1 (the engine's logprobs are raw-model ones, recorded as temperature 1); a trainer that
divides by the sampling temperature instead (the old ``policy_trainer.temperature``) is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from lecritique.engines import HFEngineConfig, SamplingParams
from lecritique.engines.hf import HFEngine
from lecritique.envs import build_environment
from lecritique.envs.sudoku import SudokuConfig
from lecritique.episodes import EpisodePlayer
from lecritique.episodes.local import EngineSampler, LocalEnvironment
from lecritique.models.policy import load_tokenizer
from lecritique.models.templates import PlainTemplate
from lecritique.training.collate import collate_policy, token_logprobs
from lecritique.training.config import OptimizerConfig, PolicyTrainerConfig
from lecritique.training.policy_trainer import PolicyTrainer
from lecritique.trajectory import LOGPROBS_TEMPERATURE_KEY


def test_the_trainer_cannot_be_given_a_temperature_of_its_own():
    with pytest.raises(ValidationError, match="temperature"):
        PolicyTrainerConfig(temperature=0.7)


def test_tempered_rollouts_give_unit_ratios_from_the_recorded_temperature(tiny_policy):
    tokenizer = load_tokenizer(tiny_policy)
    engine = HFEngine(HFEngineConfig(model_path=str(tiny_policy)))
    environment = build_environment(SudokuConfig(kind="sudoku", size=4, empty_cells=[2, 3]))
    player = EpisodePlayer(
        EngineSampler(engine),
        LocalEnvironment(environment),
        tokenizer,
        PlainTemplate(),
        SamplingParams(temperature=0.7, max_tokens=8),
        512,
        max_turns=environment.max_turns,
        seeds=lambda: 7,
    )
    records = player.play_groups(environment.sample_tasks(4, split="train", seed=0), 2)
    trajectories = [r.trajectory(f"t{i}") for i, r in enumerate(records)]
    rng = np.random.default_rng(0)
    for trajectory in trajectories:
        assert trajectory.metadata[LOGPROBS_TEMPERATURE_KEY] == 1.0
        trajectory.advantages = np.where(
            trajectory.policy_mask, rng.normal(size=trajectory.token_ids.shape), 0.0
        ).astype(np.float32)
    trainer = PolicyTrainer(tiny_policy, PolicyTrainerConfig(optimizer=OptimizerConfig(lr=1e-6)))
    batch = collate_policy(trajectories)
    with torch.no_grad():
        logits = trainer.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        recorded = token_logprobs(logits, batch.target_ids, batch.temperatures)
        divided = token_logprobs(logits, batch.target_ids, 0.7)
    mask = batch.loss_mask
    assert torch.allclose(recorded[mask], batch.old_logprobs[mask], atol=1e-4)
    assert not torch.allclose(
        divided[mask], batch.old_logprobs[mask], atol=1e-2
    )  # the mismatch the old knob allowed
    metrics = trainer.train_step(trajectories)
    assert metrics["mean_ratio"] == pytest.approx(1.0, abs=1e-4)


def test_each_row_is_divided_by_its_own_recorded_temperature():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 0.0]]])
    targets = torch.tensor([[0], [0]])
    result = token_logprobs(logits, targets, torch.tensor([1.0, 0.5]))
    assert float(result[0, 0]) == pytest.approx(
        float(torch.log_softmax(torch.tensor([2.0, 0.0]), -1)[0]), rel=1e-5
    )
    assert float(result[1, 0]) == pytest.approx(
        float(torch.log_softmax(torch.tensor([4.0, 0.0]), -1)[0]), rel=1e-5
    )
