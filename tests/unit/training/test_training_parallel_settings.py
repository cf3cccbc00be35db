"""Parallel settings in one process: activation checkpointing, the mixed-precision choice, DCP checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from lecritique.training.checkpoint import ResumeOutcome, TrainerCheckpoints, read_meta, resume
from lecritique.training.engine import OptimizerConfig
from lecritique.training.fsdp import apply_activation_checkpointing, decoder_layers, mixed_precision_dtype
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
from lecritique.trajectory import Trajectory
from tests.unit.training.training_helpers import make_trajectory


def _batches(count: int, seed: int = 3) -> list[list[Trajectory]]:
    rng = np.random.default_rng(seed)
    return [
        [
            make_trajectory(rng, i, prompt_len=3, num_tokens=5 + i % 4, advantage=float(rng.normal()))
            for i in range(6)
        ]
        for _ in range(count)
    ]


def _config(**settings: object) -> PolicyTrainerConfig:
    return PolicyTrainerConfig.model_validate(
        {"optimizer": {"lr": 1e-2}, "micro_batch_tokens": 30, **settings}
    )


def test_activation_checkpointing_gives_the_same_steps_and_weights(tiny_llama_dir: Path) -> None:
    batches = _batches(3)
    plain = PolicyTrainer(tiny_llama_dir, _config())
    recomputing = PolicyTrainer(tiny_llama_dir, _config(activation_checkpointing=True))
    wrapped = recomputing.model.model.layers[0].forward
    assert getattr(wrapped, "__name__", "") == "run"  # the layer's forward really is checkpointed
    # The same float32 maths, not the same bits: the recomputed forward and its backward may sum in
    # another order (threaded CPU kernels split a reduction by the threads they get, which a loaded
    # machine changes), so the gradients agree to GRAD_RTOL, about 84 float32 epsilons (reductions
    # over the vocabulary and the batch's tokens, ~100 terms each).
    grad_rtol = 1e-5
    for batch in batches:
        one, two = plain.train_step(batch), recomputing.train_step(batch)
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-6)
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=grad_rtol)
    names = [name for name, _ in plain.model.named_parameters()]
    assert names == [name for name, _ in recomputing.model.named_parameters()]  # names unchanged
    # AdamW moves a weight by lr * m / sqrt(v) a step; m and sqrt(v) each carry the gradients'
    # relative error, so one step's move agrees to 2 * grad_rtol * lr, whatever the weight's size
    # (a weight near zero failed a flat atol of 1e-7 by 3.2e-7). Adding the move rounds to one
    # float32 ulp of the weight a step: rtol.
    lr, steps = _config().optimizer.lr, len(batches)
    atol = steps * 2 * grad_rtol * lr
    rtol = steps * torch.finfo(torch.float32).eps
    for (_, a), (_, b) in zip(
        plain.model.named_parameters(), recomputing.model.named_parameters(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


def test_mixed_precision_is_bf16_only_where_asked_or_on_gpus() -> None:
    cpu = torch.device("cpu")
    assert mixed_precision_dtype("auto", cpu) is None
    assert mixed_precision_dtype("off", cpu) is None
    assert mixed_precision_dtype("bf16", cpu) is torch.bfloat16
    with pytest.raises(ValueError, match="mixed_precision"):
        mixed_precision_dtype("fp8", cpu)
    with pytest.raises(ValueError):
        PolicyTrainerConfig.model_validate({"parallelism": "zero3"})


def test_models_without_decoder_layer_classes_cannot_be_wrapped_per_layer() -> None:
    model = BertModel(
        BertConfig(
            hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=10
        )
    )
    model._no_split_modules = None
    with pytest.raises(ValueError, match="decoder-layer"):
        apply_activation_checkpointing(model)


def test_a_plain_bf16_process_uses_autocast_and_keeps_float32_weights(tiny_llama_dir: Path) -> None:
    trainer = PolicyTrainer(tiny_llama_dir, _config(mixed_precision="bf16"))
    metrics = trainer.train_step(_batches(1)[0])
    assert np.isfinite(metrics["loss"])
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert len(decoder_layers(trainer.model)) == 1


def test_checkpoint_in_one_process_resumes_the_optimizer_and_step(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    batches = _batches(4)
    straight = PolicyTrainer(tiny_llama_dir, _config())
    straight_metrics = [straight.train_step(batch) for batch in batches]

    first = PolicyTrainer(tiny_llama_dir, _config())
    checkpoints = TrainerCheckpoints(tmp_path / "ckpt", keep=2)
    for batch in batches[:2]:
        first.train_step(batch)
        checkpoints.save(first, extra={"record": {"step": first.steps}})
    assert checkpoints.steps() == [1, 2]
    first.train_step(batches[2])
    checkpoints.save(first)
    assert checkpoints.steps() == [2, 3]  # keep=2 pruned step 1
    latest = checkpoints.latest()
    assert latest is not None and latest[0].step == 3 and latest[0].world_size == 1
    assert read_meta(checkpoints.path(2)).extra == {"record": {"step": 2}}

    resumed = PolicyTrainer(tiny_llama_dir, _config())
    checkpoints.load(resumed, checkpoints.path(2))
    assert resumed.steps == 2
    resumed_metrics = [resumed.train_step(batch) for batch in batches[2:]]
    for one, two in zip(straight_metrics[2:], resumed_metrics, strict=True):
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-6) and two["step"] == one["step"]
    for (_, a), (_, b) in zip(
        straight.model.named_parameters(), resumed.model.named_parameters(), strict=True
    ):
        torch.testing.assert_close(b, a, rtol=0, atol=0)  # same process layout: bit for bit

    # Optimiser state only: the weights stay those of the trainer it is loaded into.
    fresh = PolicyTrainer(tiny_llama_dir, _config(optimizer=OptimizerConfig(lr=1e-2)))
    before = {name: p.detach().clone() for name, p in fresh.model.named_parameters()}
    checkpoints.load(fresh, checkpoints.path(3), weights=False)
    assert fresh.steps == 3 and len(fresh.engine.optimizer.state) > 0
    for name, parameter in fresh.model.named_parameters():
        torch.testing.assert_close(parameter, before[name], rtol=0, atol=0)


def test_an_unfinished_save_is_never_the_latest_checkpoint(tiny_llama_dir: Path, tmp_path: Path) -> None:
    trainer = PolicyTrainer(tiny_llama_dir, _config())
    checkpoints = TrainerCheckpoints(tmp_path / "ckpt")
    trainer.train_step(_batches(1)[0])
    checkpoints.save(trainer)
    (tmp_path / "ckpt" / ".staging-step-00000002").mkdir()  # a save that crashed half way
    latest = checkpoints.latest()
    assert latest is not None and latest[0].step == 1


def test_resume_restores_what_the_newest_checkpoint_holds_for_the_applied_step(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    batches = _batches(3)
    trainer = PolicyTrainer(tiny_llama_dir, _config())
    checkpoints = TrainerCheckpoints(tmp_path / "ckpt", keep=3)
    assert resume(trainer, checkpoints, applied_step=5) == ResumeOutcome("none", 5, None)
    trainer = PolicyTrainer(tiny_llama_dir, _config())
    for step, batch in enumerate(batches, start=1):
        trainer.train_step(batch)
        checkpoints.save(trainer, extra={"record": {"step": step}})

    exact = PolicyTrainer(tiny_llama_dir, _config())
    assert resume(exact, checkpoints, applied_step=3) == ResumeOutcome("exact", 3, None)
    # Checkpoint written, record not yet: the record travels with the checkpoint.
    ahead = PolicyTrainer(tiny_llama_dir, _config())
    assert resume(ahead, checkpoints, applied_step=2) == ResumeOutcome("exact", 3, {"step": 3})
    for (_, a), (_, b) in zip(trainer.model.named_parameters(), ahead.model.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    # Steps applied after the newest checkpoint: AdamW state only, the counter follows the caller.
    behind = PolicyTrainer(tiny_llama_dir, _config())
    initial = {name: p.detach().clone() for name, p in behind.model.named_parameters()}
    assert resume(behind, checkpoints, applied_step=7) == ResumeOutcome("optimizer", 7, None)
    for name, parameter in behind.model.named_parameters():
        torch.testing.assert_close(parameter, initial[name], rtol=0, atol=0)


def test_checkpoints_are_saved_every_n_steps(tiny_llama_dir: Path, tmp_path: Path) -> None:
    trainer = PolicyTrainer(tiny_llama_dir, _config())
    checkpoints = TrainerCheckpoints(tmp_path / "ckpt", keep=5, every=2)
    saved = []
    for batch in _batches(4):
        trainer.train_step(batch)
        saved.append(checkpoints.save_if_due(trainer))
    assert saved == [None, checkpoints.path(2), None, checkpoints.path(4)]
    assert checkpoints.steps() == [2, 4]
