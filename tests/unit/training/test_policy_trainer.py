"""PolicyTrainer on a tiny random Llama: the update moves log-probabilities the advantages' way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from lecritique.training.checkpoint import TrainerCheckpoints, resume
from lecritique.training.collate import collate_policy
from lecritique.training.config import DPPOLossConfig, OptimizerConfig, PolicyTrainerConfig, PPOClipLossConfig
from lecritique.training.policy_trainer import PolicyTrainer
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore
from tests.unit.training.training_helpers import VOCAB_SIZE, make_trajectory


def _fixed_batch(policy_dir: Path, seed: int = 0) -> list[Trajectory]:
    """8 trajectories, half with advantage +1 and half -1, with on-policy rollout logprobs."""
    rng = np.random.default_rng(seed)
    trajectories = [
        make_trajectory(
            rng, i, prompt_len=3, num_tokens=6 + i % 3, advantage=1.0 if i % 2 else -1.0, env_tokens=1
        )
        for i in range(8)
    ]
    # Rollout logprobs from the initial policy itself, as an on-policy engine would report them.
    model = AutoModelForCausalLM.from_pretrained(str(policy_dir))
    batch = collate_policy(trajectories)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        logprobs = (
            torch.log_softmax(logits[:, :-1], -1).gather(-1, batch.target_ids.unsqueeze(-1)).squeeze(-1)
        )
    for row, trajectory in enumerate(trajectories):
        columns = slice(2, 2 + trajectory.token_ids.shape[0])
        trajectory.logprobs = np.where(trajectory.policy_mask, logprobs[row, columns].numpy(), 0.0).astype(
            np.float32
        )
    return trajectories


def _mean_logprob_by_sign(trainer: PolicyTrainer, trajectories: list[Trajectory]) -> tuple[float, float]:
    batch = collate_policy(trajectories)
    with torch.no_grad():
        logprobs = trainer.logprobs(trainer.model, batch)
    positive = batch.loss_mask & (batch.advantages > 0)
    negative = batch.loss_mask & (batch.advantages < 0)
    return float(logprobs[positive].mean()), float(logprobs[negative].mean())


def test_on_policy_rollout_logprobs_give_unit_ratios_and_no_masking(tiny_llama_dir: Path) -> None:
    trajectories = _fixed_batch(tiny_llama_dir)
    trainer = PolicyTrainer(tiny_llama_dir, PolicyTrainerConfig(optimizer=OptimizerConfig(lr=1e-3)))
    metrics = trainer.train_step(trajectories)
    assert metrics["mean_ratio"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["mismatch_kl"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["masked_fraction"] == 0.0
    # Half the tokens have A = +1, half -1, at ratio 1: the loss is -mean(A).
    advantages = np.concatenate(
        [t.advantages[t.policy_mask] for t in trajectories if t.advantages is not None]
    )
    assert metrics["loss"] == pytest.approx(-float(advantages.mean()), abs=1e-5)
    assert metrics["policy_tokens"] == sum(t.num_policy_tokens for t in trajectories)
    assert metrics["step"] == 1.0 and trainer.steps == 1


@pytest.mark.parametrize("loss", [DPPOLossConfig(), PPOClipLossConfig()], ids=["dppo", "ppo_clip"])
def test_training_raises_positive_and_lowers_negative_advantage_tokens(
    tiny_llama_dir: Path, loss: DPPOLossConfig | PPOClipLossConfig
) -> None:
    trajectories = _fixed_batch(tiny_llama_dir)
    config = PolicyTrainerConfig(loss=loss, optimizer=OptimizerConfig(lr=3e-3, weight_decay=0.0))
    trainer = PolicyTrainer(tiny_llama_dir, config)
    positive_before, negative_before = _mean_logprob_by_sign(trainer, trajectories)
    losses = [trainer.train_step(trajectories)["loss"] for _ in range(6)]
    positive_after, negative_after = _mean_logprob_by_sign(trainer, trajectories)
    assert positive_after > positive_before + 0.05
    assert negative_after < negative_before - 0.05
    assert losses[-1] < losses[0]


def test_micro_batching_gives_the_same_update_as_one_batch(tiny_llama_dir: Path) -> None:
    trajectories = _fixed_batch(tiny_llama_dir, seed=3)
    updated = []
    for budget in (10_000, 12):  # one micro-batch vs one trajectory per micro-batch
        config = PolicyTrainerConfig(micro_batch_tokens=budget, optimizer=OptimizerConfig(lr=1e-2))
        trainer = PolicyTrainer(tiny_llama_dir, config)
        metrics = [trainer.train_step(trajectories)]
        gradients = [p.grad.detach().clone() for p in trainer.model.parameters() if p.grad is not None]
        metrics.append(trainer.train_step(trajectories))
        updated.append((metrics, gradients, [p.detach().clone() for p in trainer.model.parameters()]))
    (one_metrics, one_gradients, one_weights), (micro_metrics, micro_gradients, micro_weights) = updated
    for one, micro in zip(one_metrics, micro_metrics, strict=True):
        assert micro["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-7)
        assert micro["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
    assert len(one_gradients) == len(micro_gradients) == len(one_weights)
    for one, micro in zip(one_gradients, micro_gradients, strict=True):
        torch.testing.assert_close(micro, one, rtol=1e-4, atol=1e-7)
    # Adam divides by sqrt(v): a near-zero gradient's rounding noise can move a weight by up to
    # ~lr, so weights get a looser absolute tolerance than gradients (lr is 1e-2 here).
    for one, micro in zip(one_weights, micro_weights, strict=True):
        torch.testing.assert_close(micro, one, rtol=1e-5, atol=1e-4)


def test_gradient_is_clipped_to_the_configured_global_norm(tiny_llama_dir: Path) -> None:
    trajectories = _fixed_batch(tiny_llama_dir)
    for trajectory in trajectories:
        assert trajectory.advantages is not None
        trajectory.advantages *= 1000.0  # a huge gradient
    config = PolicyTrainerConfig(optimizer=OptimizerConfig(lr=1e-3, grad_clip=0.5))
    trainer = PolicyTrainer(tiny_llama_dir, config)
    initial = [p.detach().clone() for p in trainer.model.parameters()]
    metrics = trainer.train_step(trajectories)
    assert metrics["grad_norm"] > 0.5
    clipped_norm = torch.linalg.vector_norm(
        torch.stack(
            [torch.linalg.vector_norm(p.grad) for p in trainer.model.parameters() if p.grad is not None]
        )
    )
    assert float(clipped_norm) == pytest.approx(0.5, rel=1e-4)
    assert any(
        not torch.equal(before, p) for before, p in zip(initial, trainer.model.parameters(), strict=True)
    )


def test_save_writes_a_loadable_hf_directory_with_the_tokenizer(tiny_llama_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    model = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir))
    model.save_pretrained(source)
    (source / "tokenizer.json").write_text('{"version": "1.0"}')
    trajectories = _fixed_batch(source)
    trainer = PolicyTrainer(source, PolicyTrainerConfig(optimizer=OptimizerConfig(lr=1e-2)))
    trainer.train_step(trajectories)
    saved = trainer.save(tmp_path / "v1")
    assert saved == tmp_path / "v1"
    assert (saved / "tokenizer.json").read_text() == '{"version": "1.0"}'
    reloaded = AutoModelForCausalLM.from_pretrained(str(saved))
    for original, loaded in zip(
        trainer.model.state_dict().values(), reloaded.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(loaded, original)
    assert not torch.equal(
        next(iter(model.state_dict().values())), next(iter(reloaded.state_dict().values()))
    )


def test_bad_batches_are_rejected_before_any_update(tiny_llama_dir: Path) -> None:
    trainer = PolicyTrainer(tiny_llama_dir, PolicyTrainerConfig())
    rng = np.random.default_rng(0)
    good = make_trajectory(rng, 0, 3, 5, advantage=1.0)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    with pytest.raises(ValueError, match="trajectory 1 \\('t1'\\): field 'advantages' is missing"):
        trainer.train_step([good, make_trajectory(rng, 1, 3, 5, advantage=None)])
    out_of_vocab = make_trajectory(rng, 2, 3, 5, advantage=1.0)
    out_of_vocab.token_ids[0] = VOCAB_SIZE
    with pytest.raises(ValueError, match=f"token id {VOCAB_SIZE} >= vocab size {VOCAB_SIZE}"):
        trainer.train_step([good, out_of_vocab])
    assert trainer.steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    with pytest.raises(ValueError, match=r"no config\.json"):
        PolicyTrainer(tiny_llama_dir / "missing")


def test_publish_writes_increasing_versions_to_the_weight_store(tiny_llama_dir: Path, tmp_path: Path) -> None:
    trajectories = _fixed_batch(tiny_llama_dir)
    trainer = PolicyTrainer(tiny_llama_dir, PolicyTrainerConfig(optimizer=OptimizerConfig(lr=1e-2)))
    store = WeightStore(tmp_path / "weights")
    assert trainer.publish(store) == 0
    trainer.train_step(trajectories)
    assert trainer.publish(store) == 1
    assert store.versions("policy") == [0, 1]
    latest = store.latest("policy")
    assert latest is not None and latest[0] == 1
    published = AutoModelForCausalLM.from_pretrained(str(latest[1]))
    for name, weight in trainer.model.state_dict().items():
        torch.testing.assert_close(published.state_dict()[name], weight)


def test_a_restarted_trainer_resumes_bit_for_bit(tiny_llama_dir: Path, tmp_path: Path) -> None:
    """Killed after publishing step 2 and restarted from that version, the trainer's step 3 gives
    exactly the weights of a trainer that never stopped: the published directory holds weights
    only, and the one checkpoint mechanism (DCP, unsharded here) restores AdamW moments and step
    count (float32 on CPU is deterministic, so equality is exact)."""
    config = PolicyTrainerConfig(optimizer=OptimizerConfig(lr=1e-2))
    batches = [_fixed_batch(tiny_llama_dir, seed) for seed in range(3)]
    torch.manual_seed(0)
    unstopped = PolicyTrainer(tiny_llama_dir, config)
    for batch in batches:
        unstopped.train_step(batch)
    torch.manual_seed(0)
    first = PolicyTrainer(tiny_llama_dir, config)
    checkpoints = TrainerCheckpoints(tmp_path / "checkpoints")
    for batch in batches[:2]:
        first.train_step(batch)
        checkpoints.save_if_due(first)
    published = first.save(tmp_path / "v2")
    assert published is not None
    del first
    torch.manual_seed(0)
    restarted = PolicyTrainer(published, config)
    assert restarted.steps == 0 and not restarted.engine.optimizer.state  # weights only
    assert resume(restarted, checkpoints, applied_step=2).mode == "exact"
    assert restarted.steps == 2
    restarted.train_step(batches[2])
    for (name, expected), actual in zip(
        unstopped.model.state_dict().items(), restarted.model.state_dict().values(), strict=True
    ):
        assert torch.equal(expected, actual), name
