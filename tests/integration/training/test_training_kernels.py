"""Issue #38 on the CPU: attention-kernel choice, padding of sorted micro-batches, the critic's
forward-only path and deterministic mode."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch.nn.attention import SDPBackend

from lecritique.training import collate, engine
from lecritique.training.collate import padding_fraction, split_by_token_budget
from lecritique.training.critic_trainer import CriticTrainer, CriticTrainerConfig
from lecritique.training.kernels import backend_names, sdpa_backends
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
from lecritique.trajectory import Trajectory
from tests.unit.training.training_helpers import make_trajectory


def _mixed_batch(seed: int = 5) -> list[Trajectory]:
    """Rows of very different lengths, interleaved so that in-order grouping pads a lot."""
    rng = np.random.default_rng(seed)
    lengths = [4, 30, 5, 28, 6, 26, 4, 31]
    return [
        make_trajectory(
            rng, i, prompt_len=3, num_tokens=n, advantage=float(rng.normal()), reward=float(i % 2)
        )
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize(
    ("setting", "device", "dtype", "expected"),
    [
        ("auto", "cuda", torch.bfloat16, ["flash", "efficient"]),
        ("auto", "cuda", torch.float16, ["flash", "efficient"]),
        ("auto", "cuda", torch.float32, ["efficient", "math"]),
        ("auto", "cpu", torch.float32, ["math"]),
        ("auto", "cpu", torch.bfloat16, ["math"]),
        ("flash", "cuda", torch.bfloat16, ["flash"]),
        ("cudnn", "cuda", torch.bfloat16, ["cudnn"]),
        ("efficient", "cpu", torch.float32, ["efficient"]),
    ],
)
def test_attention_backends_are_the_documented_ones(
    setting: str, device: str, dtype: torch.dtype, expected: list[str]
) -> None:
    assert backend_names(sdpa_backends(setting, device, dtype)) == expected


def test_auto_never_picks_cudnn_and_deterministic_is_math() -> None:
    for device in ("cuda", "cpu"):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            assert SDPBackend.CUDNN_ATTENTION not in sdpa_backends("auto", device, dtype)
            assert sdpa_backends("auto", device, dtype, deterministic=True) == [SDPBackend.MATH]
    with pytest.raises(ValueError, match="nondeterministic backward"):
        sdpa_backends("flash", "cuda", torch.bfloat16, deterministic=True)
    with pytest.raises(ValueError, match="attention_backend"):
        sdpa_backends("fast", "cuda", torch.bfloat16)


def test_attention_backend_setting_validates() -> None:
    assert PolicyTrainerConfig(attention_backend="efficient").attention_backend == "efficient"
    with pytest.raises(ValidationError, match="attention_backend"):
        PolicyTrainerConfig.model_validate({"attention_backend": "fast"})
    with pytest.raises(ValidationError, match="predict_batch_tokens"):
        CriticTrainerConfig.model_validate({"predict_batch_tokens": 0})


def test_a_trainer_step_runs_under_the_chosen_kernel_and_logs_it(
    tiny_llama_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[SDPBackend]] = []
    real = torch.nn.attention.sdpa_kernel

    def recording(backends: list[SDPBackend], *args: object, **kwargs: object) -> object:
        seen.append(list(backends))
        return real(backends, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("lecritique.training.kernels.sdpa_kernel", recording)
    with caplog.at_level(logging.INFO, logger="lecritique.training.kernels"):
        trainer = PolicyTrainer(tiny_llama_dir, PolicyTrainerConfig(attention_backend="math"))
    assert "attention backend math (attention_backend math, cpu, float32)" in caplog.text
    metrics = trainer.train_step(_mixed_batch())
    assert np.isfinite(metrics["loss"]) and seen and all(b == [SDPBackend.MATH] for b in seen)
    # A kernel that cannot run this input fails loudly rather than falling back silently.
    cudnn_only = PolicyTrainer(tiny_llama_dir, PolicyTrainerConfig(attention_backend="cudnn"))
    with pytest.raises(RuntimeError):
        cudnn_only.train_step(_mixed_batch())


def test_sorting_lowers_padding() -> None:
    lengths = [4, 30, 5, 28, 6, 26, 4, 31]
    sorted_groups = split_by_token_budget(lengths, 64)
    in_order = split_by_token_budget(lengths, 64, sort_by_length=False)
    assert padding_fraction(lengths, sorted_groups) < padding_fraction(lengths, in_order)
    assert padding_fraction([5, 5], [[0, 1]]) == 0.0
    assert padding_fraction([2, 6], [[0, 1]]) == pytest.approx(4 / 12)


def _unsorted(monkeypatch: pytest.MonkeyPatch) -> None:
    def in_order(lengths: list[int], budget: int, sort_by_length: bool = True) -> list[list[int]]:
        return collate.split_by_token_budget(lengths, budget, sort_by_length=False)

    monkeypatch.setattr(engine, "split_by_token_budget", in_order)


def test_sorted_policy_step_pads_less_and_computes_the_same_step(
    tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = PolicyTrainerConfig.model_validate(
        {"optimizer": {"lr": 1e-2}, "micro_batch_tokens": 70, "packing": False}
    )
    batch = _mixed_batch()
    sorted_metrics = PolicyTrainer(tiny_llama_dir, config).train_step(batch)
    _unsorted(monkeypatch)
    unsorted_metrics = PolicyTrainer(tiny_llama_dir, config).train_step(batch)
    assert sorted_metrics["padding_fraction"] < unsorted_metrics["padding_fraction"]
    assert 0.0 <= sorted_metrics["padding_fraction"] < 0.25 < unsorted_metrics["padding_fraction"]
    for key in ("loss", "grad_norm", "kl_mean"):
        if key in sorted_metrics:
            assert sorted_metrics[key] == pytest.approx(unsorted_metrics[key], rel=1e-5, abs=1e-7), key


def test_sorted_critic_step_pads_less_and_computes_the_same_step(
    tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = CriticTrainerConfig.model_validate({"micro_batch_tokens": 70, "packing": False})
    batch = _mixed_batch()
    torch.manual_seed(0)  # the same fresh head for both
    sorted_metrics = CriticTrainer.from_policy(tiny_llama_dir, config).train_step(batch)
    _unsorted(monkeypatch)
    torch.manual_seed(0)
    unsorted_metrics = CriticTrainer.from_policy(tiny_llama_dir, config).train_step(batch)
    assert sorted_metrics["padding_fraction"] < unsorted_metrics["padding_fraction"]
    for key in ("loss", "grad_norm", "explained_variance"):
        assert sorted_metrics[key] == pytest.approx(unsorted_metrics[key], rel=1e-5, abs=1e-7), key


def test_predict_equals_the_training_forward_without_a_graph(
    tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = CriticTrainerConfig.model_validate({"micro_batch_tokens": 40, "predict_batch_tokens": 1000})
    critic = CriticTrainer.from_policy(tiny_llama_dir, config)
    batch = _mixed_batch()
    grad_modes: list[tuple[bool, bool]] = []
    real_outputs = CriticTrainer._state_outputs

    def recording(self: CriticTrainer, module: torch.nn.Module, micro: collate.CriticBatch) -> torch.Tensor:
        outputs = real_outputs(self, module, micro)
        grad_modes.append((outputs.requires_grad, torch.is_inference_mode_enabled()))
        return outputs

    monkeypatch.setattr(CriticTrainer, "_state_outputs", recording)
    predicted = critic.predict(batch)
    lengths = [collate.critic_length(t) for t in batch]
    names = [f"row {i}" for i in range(len(batch))]
    forwards = len(critic.layouts(lengths, 1000, "predict_batch_tokens", names))
    # Fewer forwards than micro_batch_tokens would need (predict_batch_tokens is larger).
    assert forwards < len(critic.layouts(lengths, 40, "micro_batch_tokens", names))
    assert grad_modes == [(False, True)] * forwards
    grad_modes.clear()
    with torch.enable_grad():
        for index, trajectory in enumerate(batch):
            training = collate.collate_critic([trajectory])
            outputs = recording(critic, critic.engine.forward_module, training)
            values = torch.sigmoid(outputs)[0, : trajectory.token_ids.shape[0]].detach().numpy()
            np.testing.assert_allclose(predicted[index], values, rtol=1e-5, atol=1e-6)
    assert all(requires_grad for requires_grad, _ in grad_modes)


_DETERMINISTIC_RUN = r"""
import sys, numpy as np, torch
from tests.unit.training.training_helpers import make_trajectory
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
torch.manual_seed(0)
rng = np.random.default_rng(1)
config = PolicyTrainerConfig.model_validate({"optimizer": {"lr": 1e-2}, "micro_batch_tokens": 40, "deterministic": True})
trainer = PolicyTrainer(sys.argv[1], config)
assert torch.are_deterministic_algorithms_enabled()
import os
assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
for step in range(3):
    batch = [make_trajectory(rng, i, 3, 4 + (i * 7 + step) % 20, advantage=float(rng.normal())) for i in range(6)]
    metrics = trainer.train_step(batch)
    print(repr(metrics["loss"]), repr(metrics["grad_norm"]))
"""


def test_two_deterministic_runs_are_bit_identical(tiny_llama_dir: Path) -> None:
    root = Path(__file__).resolve().parents[3]

    def run() -> str:
        result = subprocess.run(
            [sys.executable, "-c", _DETERMINISTIC_RUN, str(tiny_llama_dir)],
            cwd=root,
            env={"PYTHONPATH": f"{root / 'libs'}:{root}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    first, second = run(), run()
    assert len(first.splitlines()) == 3 and first == second


def test_publishing_in_bf16_halves_the_bytes_and_equals_the_trainers_cast(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    from lecritique.training.weight_sync import WeightSync, publish_dtype
    from lecritique.weights import WeightStore

    trainer = PolicyTrainer(tiny_llama_dir, PolicyTrainerConfig.model_validate({"optimizer": {"lr": 1e-2}}))
    trainer.train_step(_mixed_batch())
    store = WeightStore(tmp_path / "store")
    full = WeightSync(trainer, store, "policy", None, receivers=0, dtype=publish_dtype("trained")).publish()
    half = WeightSync(trainer, store, "policy", None, receivers=0, dtype=publish_dtype("bfloat16")).publish()
    assert full is not None and half is not None

    def tensors(version: int) -> dict[str, torch.Tensor]:
        [file] = store.path("policy", version).glob("*.safetensors")
        return load_file(str(file))

    written, expected = tensors(half), dict(trainer.model.named_parameters())
    assert set(written) == set(expected)
    for name, tensor in written.items():
        assert tensor.dtype == torch.bfloat16 and torch.equal(
            tensor, expected[name].detach().to(torch.bfloat16)
        )
    float_bytes = sum(t.numel() * t.element_size() for t in tensors(full).values())
    assert sum(t.numel() * t.element_size() for t in written.values()) * 2 == float_bytes
