"""Packed micro-batches (issue #49): the same steps, values and log-probabilities as padded ones.

Tolerance, derived from float32 rather than tuned. Packed and padded micro-batches run the same
operations on every row, but in tensors of other shapes, so the kernels may associate the sums
of a matrix product, a softmax over keys, a log-softmax over the vocabulary or the loss's sum
over tokens differently. Reassociating a float sum of n terms changes it by at most about
n * u times the sum of the magnitudes of its terms (u = 2^-24, float32's unit roundoff), and the
step compounds one such reduction per decoder layer plus two (the log-softmax and the sum over the
batch's tokens). So losses, per-token values and log-probabilities, and each gradient tensor
(normwise) must agree within ``RTOL = (layers + 2) * n * u``, n the longest reduction in the step
(tokens of the batch, line width, hidden, intermediate and vocabulary sizes). Updated weights:
AdamW's first step moves a weight by ``lr * g / (|g| + eps)`` (bias-corrected moments: m = g,
v = g^2), which turns a tiny difference of a gradient near 0 into up to ``2 lr``; the weights are
held to that step computed from each run's own gradients, plus a few ulps of rounding.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
from transformers import LlamaConfig, LlamaForCausalLM

from lecritique.training import packing
from lecritique.training.collate import collate_critic, collate_policy, critic_length, policy_length
from lecritique.training.critic_trainer import CriticTrainer, CriticTrainerConfig
from lecritique.training.distributed import free_local_port
from lecritique.training.packing import Layout, RowTooLong, pack
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
from lecritique.trajectory import Trajectory
from tests.unit.training.training_helpers import VOCAB_SIZE, make_trajectory

UNIT_ROUNDOFF = 2.0**-24
"""float32: half the distance from 1 to the next float."""

LENGTHS = [2, 60, 3, 17, 45, 5, 8, 33, 1, 12, 25, 4]
"""Response lengths of very different sizes (prompts of 1-5 tokens come on top)."""

LR = 1e-2


def _batch(seed: int = 0, lengths: list[int] = LENGTHS, context: bool = False) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    return [
        make_trajectory(
            rng,
            i,
            prompt_len=int(rng.integers(1, 6)),
            num_tokens=n,
            advantage=float(rng.normal()),
            reward=float(i % 2),
            env_tokens=2 if n > 10 else 0,
            critic_context_len=int(rng.integers(0, 4)) if context else 0,
        )
        for i, n in enumerate(lengths)
    ]


def _rtol(model_dir: Path, batch: list[Trajectory], budget: int) -> float:
    config = LlamaConfig.from_pretrained(model_dir)
    longest = max(
        sum(critic_length(t) for t in batch),
        budget,
        config.hidden_size,
        config.intermediate_size,
        config.vocab_size,
    )
    return (config.num_hidden_layers + 2) * longest * UNIT_ROUNDOFF


def _full(tensor: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return (tensor.full_tensor() if isinstance(tensor, DTensor) else tensor).detach().clone()


def _after_step(trainer: Any) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(weights, gradients) of every parameter after a step (the engine keeps the last gradients)."""
    return {
        name: (_full(parameter), _full(parameter.grad))
        for name, parameter in trainer.model.named_parameters()
        if parameter.grad is not None
    }


def _assert_same_step(
    padded: dict[str, float],
    packed: dict[str, float],
    padded_state: dict[str, tuple[torch.Tensor, torch.Tensor]],
    packed_state: dict[str, tuple[torch.Tensor, torch.Tensor]],
    before: dict[str, torch.Tensor],
    rtol: float,
    keys: tuple[str, ...] = ("loss", "grad_norm"),
) -> None:
    for key in keys:
        assert packed[key] == pytest.approx(padded[key], rel=rtol, abs=rtol), key
    assert padded_state.keys() == packed_state.keys()
    eps = 1e-8  # OptimizerConfig's AdamW eps
    for name, (weight, gradient) in padded_state.items():
        other_weight, other_gradient = packed_state[name]
        scale = float(gradient.norm())
        assert float((gradient - other_gradient).norm()) <= rtol * scale + 1e-30, name
        # AdamW's first step from the same weights (see the module docstring).
        steps = LR * (gradient / (gradient.abs() + eps) - other_gradient / (other_gradient.abs() + eps)).abs()
        rounding = 8 * UNIT_ROUNDOFF * (LR + before[name].abs())
        excess = (weight - other_weight).abs() - (steps + rounding)
        assert float(excess.max()) <= 0.0, f"{name}: weights differ by {float(excess.max())} beyond the bound"


# --- layouts -------------------------------------------------------------------------------------


def _check_layouts(layouts: list[Layout], lengths: list[int], budget: int, attention: str) -> None:
    placed = sorted(row for layout in layouts for row in layout.rows)
    assert placed == list(range(len(lengths)))  # every row exactly once
    for layout in layouts:
        assert layout.packed and layout.cells <= budget
        fill = [0] * layout.num_lines
        spans: dict[int, list[tuple[int, int]]] = {}
        for row, line, offset in zip(layout.rows, layout.lines, layout.offsets, strict=True):
            assert offset + lengths[row] <= layout.width
            spans.setdefault(line, []).append((offset, offset + lengths[row]))
            fill[line] += lengths[row]
        for segments in spans.values():  # rows of a line never overlap
            ordered = sorted(segments)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered))
        assert layout.width == max(fill)
        if attention == "varlen":
            assert layout.num_lines == 1  # the varlen kernel wants one line, and it has no padding
        else:
            longest = max(lengths[row] for row in layout.rows)
            assert layout.width == longest
            assert all(used >= longest / 2 for used in fill)  # every line at least half full


@pytest.mark.parametrize("attention", ["mask", "varlen"])
def test_packing_places_every_row_once_within_the_budget(attention: str) -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        lengths = [int(x) for x in np.ceil(rng.lognormal(3.0, 1.0, int(rng.integers(1, 80))))]
        budget = max(lengths) * int(rng.integers(1, 6))
        layouts = pack(lengths, budget, attention)  # type: ignore[arg-type]
        _check_layouts(layouts, lengths, budget, attention)
        assert layouts == pack(lengths, budget, attention)  # type: ignore[arg-type]  # deterministic


def test_packing_pads_far_less_than_padding_on_long_tailed_rows() -> None:
    rng = np.random.default_rng(2)
    lengths = [int(x) for x in np.ceil(rng.lognormal(4.0, 0.9, 256))]
    budget = 4 * max(lengths)
    packed = pack(lengths, budget, "mask")
    real = sum(lengths)
    packed_fraction = 1 - real / sum(layout.cells for layout in packed)
    padded = [packing.padded_layout(group, lengths) for group in _padded_groups(lengths, budget)]
    padded_fraction = 1 - real / sum(layout.cells for layout in padded)
    assert packed_fraction < 0.08 < 0.15 < padded_fraction


def _padded_groups(lengths: list[int], budget: int) -> list[list[int]]:
    from lecritique.training.collate import split_by_token_budget

    return split_by_token_budget(lengths, budget)


def test_a_row_longer_than_the_budget_is_refused_naming_it_and_the_budget() -> None:
    with pytest.raises(RowTooLong, match=r"row 1 has 50 tokens, more than micro_batch_tokens = 40"):
        pack([10, 50, 3], 40, "mask")
    with pytest.raises(ValueError, match="must be >= 1"):
        pack([1], 0, "mask")


def test_the_attention_choice_follows_the_model_and_is_named() -> None:
    assert packing.packed_attention("sdpa") == "mask"
    assert packing.packed_attention(None) == "mask"
    assert packing.packed_attention("eager") == "additive"
    assert packing.packed_attention("flash_attention_2") == "varlen"
    assert packing.packed_attention("flex_attention") is None
    assert "padded rows" in packing.describe(None, True, "flex_attention")
    assert packing.describe("mask", False, "sdpa") == "padded rows (packing off)"
    assert "SDPA's attn_mask" in packing.describe("mask", True, "sdpa")
    # No flash attention without CUDA and half precision.
    assert not packing.varlen_available(torch.device("cpu"), torch.bfloat16)


def test_the_block_mask_keeps_each_row_to_itself_and_its_past() -> None:
    segments = torch.tensor([[0, 0, 1, 1, 1, -1]])
    mask = packing.block_causal_mask(segments)[0, 0]
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(mask, expected)


# --- the model's forward over packed lines ------------------------------------------------------


@pytest.mark.parametrize(
    ("implementation", "attention"), [("sdpa", "mask"), ("eager", "additive"), ("sdpa", "varlen")]
)
def test_packed_logits_are_each_rows_own(implementation: str, attention: str) -> None:
    """``varlen`` hands the model position ids alone; on the CPU HF's SDPA path reads the row
    boundaries from them as flash attention's varlen path does (a 0 starts a row)."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    model = LlamaForCausalLM(config).eval()
    model.config._attn_implementation = implementation
    batch = _batch(3)
    lengths = [policy_length(t) for t in batch]
    layouts = pack(lengths, 4 * max(lengths), attention)  # type: ignore[arg-type]
    assert any(len(set(layout.lines)) < len(layout.rows) for layout in layouts)  # rows do share lines
    rtol = (config.num_hidden_layers + 2) * max(sum(lengths), 64) * UNIT_ROUNDOFF
    with torch.no_grad():
        for layout in layouts:
            micro = collate_policy(batch, layout=layout)
            logits = model(**micro.model_inputs(attention)).logits  # type: ignore[arg-type]
            for row, line, offset in zip(layout.rows, layout.lines, layout.offsets, strict=True):
                alone = collate_policy([batch[row]])
                expected = model(input_ids=alone.input_ids, attention_mask=alone.attention_mask).logits[0]
                got = logits[line, offset : offset + lengths[row]]
                torch.testing.assert_close(got, expected, rtol=rtol, atol=rtol)


# --- the policy trainer --------------------------------------------------------------------------


def _policy(model_dir: Path, packing_on: bool, **settings: Any) -> PolicyTrainer:
    config = {"optimizer": {"lr": LR}, "micro_batch_tokens": 128, "packing": packing_on, **settings}
    return PolicyTrainer(model_dir, PolicyTrainerConfig.model_validate(config))


def _policy_step(
    model_dir: Path, packing_on: bool, batch: list[Trajectory], **settings: Any
) -> tuple[Any, ...]:
    trainer = _policy(model_dir, packing_on, **settings)
    before = {name: _full(p) for name, p in trainer.model.named_parameters()}
    logprobs = trainer.token_logprobs(batch)
    metrics = trainer.train_step(batch)
    return trainer, metrics, _after_step(trainer), before, logprobs


@pytest.mark.parametrize("loss", ["dppo", "ppo_clip"])
def test_a_packed_policy_step_equals_the_padded_step(tiny_llama_dir: Path, loss: str, caplog: Any) -> None:
    batch = _batch()
    rtol = _rtol(tiny_llama_dir, batch, 128)
    with caplog.at_level(logging.INFO, logger="lecritique.training.engine"):
        _, padded, padded_state, before, padded_logprobs = _policy_step(
            tiny_llama_dir, False, batch, loss={"kind": loss}
        )
        trainer, packed, packed_state, _, packed_logprobs = _policy_step(
            tiny_llama_dir, True, batch, loss={"kind": loss}
        )
    assert "policy trainer: packed rows: block-diagonal causal mask through SDPA's attn_mask" in caplog.text
    assert "policy trainer: padded rows (packing off)" in caplog.text
    assert trainer.packed_attention == "mask"
    _assert_same_step(
        padded,
        packed,
        padded_state,
        packed_state,
        before,
        rtol,
        ("loss", "grad_norm", "pg_loss", "mean_ratio"),
    )
    for mine, theirs, trajectory in zip(packed_logprobs, padded_logprobs, batch, strict=True):
        assert mine.shape == trajectory.token_ids.shape
        np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=rtol)
    assert packed["padding_fraction"] < 0.05 < 0.15 < padded["padding_fraction"]


def test_packed_log_probabilities_are_those_of_each_row_alone(tiny_llama_dir: Path) -> None:
    batch = _batch(4)
    rtol = _rtol(tiny_llama_dir, batch, 128)
    trainer = _policy(tiny_llama_dir, True)
    packed = trainer.token_logprobs(batch)
    for trajectory, values in zip(batch, packed, strict=True):
        (alone,) = trainer.token_logprobs([trajectory])
        np.testing.assert_allclose(values, alone, rtol=rtol, atol=rtol)


def test_a_row_longer_than_the_budget_is_refused_before_any_update(tiny_llama_dir: Path) -> None:
    trainer = _policy(tiny_llama_dir, True, micro_batch_tokens=40)
    batch = _batch(5, [5, 50, 3])
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    length = policy_length(batch[1])
    with pytest.raises(
        ValueError,
        match=rf"trajectory 1 \('t1'\) has {length} tokens, more than policy_trainer.micro_batch_tokens = 40",
    ):
        trainer.train_step(batch)
    assert trainer.steps == 0
    for name, parameter in trainer.model.named_parameters():
        assert torch.equal(parameter, before[name]), name
    # Padded, the long row gets a micro-batch of its own, as before.
    assert np.isfinite(_policy(tiny_llama_dir, False, micro_batch_tokens=40).train_step(batch)["loss"])


def test_a_packed_lvopd_step_equals_the_padded_step(tiny_llama_dir: Path) -> None:
    batch = _batch(6)
    rtol = _rtol(tiny_llama_dir, batch, 128)
    distillation = {"teacher": str(tiny_llama_dir), "gate": "trajectory_failure", "success_threshold": 0.5}
    runs = [_policy_step(tiny_llama_dir, on, batch, distillation=distillation) for on in (False, True)]
    (_, padded, padded_state, before, _), (_, packed, packed_state, _, _) = runs
    assert padded["distill_gated_fraction"] == packed["distill_gated_fraction"] > 0
    _assert_same_step(
        padded, packed, padded_state, packed_state, before, rtol, ("loss", "grad_norm", "distill_kl")
    )


# --- the critic trainer --------------------------------------------------------------------------


def _critic(model_dir: Path, packing_on: bool, **settings: Any) -> CriticTrainer:
    config = {"optimizer": {"lr": LR}, "micro_batch_tokens": 128, "packing": packing_on, **settings}
    torch.manual_seed(0)  # the same fresh head
    return CriticTrainer.from_policy(model_dir, CriticTrainerConfig.model_validate(config))


@pytest.mark.parametrize("loss", ["bce", "mse"])
def test_a_packed_critic_step_and_its_values_equal_the_padded_ones(tiny_llama_dir: Path, loss: str) -> None:
    batch = _batch(7, context=True)
    rtol = _rtol(tiny_llama_dir, batch, 128)
    results = []
    for on in (False, True):
        critic = _critic(tiny_llama_dir, on, loss=loss, predict_batch_tokens=256)
        before = {name: _full(p) for name, p in critic.model.named_parameters()}
        values = critic.predict(batch)
        metrics = critic.train_step(batch)
        results.append((metrics, _after_step(critic), before, values))
    (padded, padded_state, before, padded_values), (packed, packed_state, _, packed_values) = results
    _assert_same_step(
        padded, packed, padded_state, packed_state, before, rtol, ("loss", "grad_norm", "explained_variance")
    )
    for mine, theirs, trajectory in zip(packed_values, padded_values, batch, strict=True):
        assert mine.shape == trajectory.token_ids.shape
        np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=rtol)
    assert packed["padding_fraction"] < 0.05 < 0.15 < padded["padding_fraction"]


def test_packed_critic_values_are_those_of_each_row_alone(tiny_llama_dir: Path) -> None:
    batch = _batch(8, context=True)
    rtol = _rtol(tiny_llama_dir, batch, 128)
    critic = _critic(tiny_llama_dir, True)
    packed = critic.predict(batch)
    lengths = [critic_length(t) for t in batch]
    layouts = critic.layouts(
        lengths, critic.config.predict_batch_tokens, "budget", [str(i) for i in range(12)]
    )
    assert len(layouts) < len(batch)  # several rows per forward
    for trajectory, values in zip(batch, packed, strict=True):
        np.testing.assert_allclose(values, critic.predict([trajectory])[0], rtol=rtol, atol=rtol)
    # The batch's per-row tensors follow the layout's rows.
    micro = collate_critic(batch, layout=layouts[0])
    assert micro.value_positions.shape[0] == len(layouts[0].rows)


def test_critic_predict_refuses_a_row_longer_than_its_budget(tiny_llama_dir: Path) -> None:
    critic = _critic(tiny_llama_dir, True, predict_batch_tokens=30)
    batch = _batch(9, [5, 40])
    with pytest.raises(
        ValueError, match=r"trajectory 1 \('t1'\) has \d+ tokens, more than critic.predict_batch_tokens = 30"
    ):
        critic.predict(batch)


# --- FSDP2 (world size 1) and activation checkpointing ------------------------------------------


@pytest.fixture
def process_group() -> Iterator[None]:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_local_port()}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.usefixtures("process_group")
def test_packed_steps_equal_padded_ones_under_fsdp2_with_activation_checkpointing(
    tiny_llama_dir: Path,
) -> None:
    batch = _batch(10, context=True)
    rtol = _rtol(tiny_llama_dir, batch, 128)
    settings = {"parallelism": "fsdp2", "activation_checkpointing": True}
    runs = [_policy_step(tiny_llama_dir, on, batch, **settings) for on in (False, True)]
    (padded_trainer, padded, padded_state, before, padded_logprobs) = runs[0]
    (packed_trainer, packed, packed_state, _, packed_logprobs) = runs[1]
    assert padded_trainer.engine.sharded and packed_trainer.engine.sharded
    assert packed_trainer.model.model.layers[0].forward.__name__ == "run"  # checkpointed
    _assert_same_step(padded, packed, padded_state, packed_state, before, rtol)
    for mine, theirs in zip(packed_logprobs, padded_logprobs, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=rtol)

    critics = []
    for on in (False, True):
        critic = _critic(tiny_llama_dir, on, **settings)
        critic_before = {name: _full(p) for name, p in critic.model.named_parameters()}
        values = critic.predict(batch)
        critics.append((critic.train_step(batch), _after_step(critic), critic_before, values))
    (padded, padded_state, critic_before, padded_values), (packed, packed_state, _, packed_values) = critics
    _assert_same_step(padded, packed, padded_state, packed_state, critic_before, rtol)
    for mine, theirs in zip(packed_values, padded_values, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=rtol)
    assert math.isfinite(packed["loss"]) and packed["padding_fraction"] < 0.05
