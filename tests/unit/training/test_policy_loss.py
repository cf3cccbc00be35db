"""DPPO+KL and PPO-clip against hand-computed values, masks and gradients."""

from __future__ import annotations

import math

import pydantic
import pytest
import torch

from lecritique.training.config import DPPOLossConfig, PolicyLossConfig, PPOClipLossConfig
from lecritique.training.policy_loss import dppo_loss, policy_loss, ppo_clip_loss


def _logs(*probabilities: float) -> torch.Tensor:
    return torch.log(torch.tensor(probabilities, dtype=torch.float64))


def test_dppo_masks_each_direction_only_when_the_advantage_pushes_that_way() -> None:
    # token: 0 rose 0.3 with A>0 (dropped, high); 1 rose 0.3 with A<0 (kept);
    #        2 fell 0.3 with A<0 (dropped, low);  3 fell 0.3 with A>0 (kept);
    #        4 rose 0.1 with A>0 (kept: under the threshold); 5 A=0 rose 0.3 (kept, no push).
    new = _logs(0.6, 0.6, 0.2, 0.2, 0.5, 0.6)
    old = _logs(0.3, 0.3, 0.5, 0.5, 0.4, 0.3)
    advantages = torch.tensor([1.0, -1.0, -1.0, 1.0, 2.0, 0.0], dtype=torch.float64)
    mask = torch.ones(6, dtype=torch.bool)
    config = DPPOLossConfig(kl_coef=0.0)
    loss, statistics = dppo_loss(new, old, advantages, mask, config)
    ratios = torch.tensor([2.0, 2.0, 0.4, 0.4, 1.25, 2.0], dtype=torch.float64)
    kept = torch.tensor([0, 1, 0, 1, 1, 1], dtype=torch.float64)
    expected = float(-(kept * advantages * ratios).sum() / 6)
    assert float(loss) == pytest.approx(expected, rel=1e-12)
    assert float(statistics.masked) == 2
    assert float(statistics.masked_high) == 1
    assert float(statistics.masked_low) == 1
    metrics = statistics.as_metrics()
    assert metrics["masked_fraction"] == pytest.approx(2 / 6)
    assert metrics["mean_ratio"] == pytest.approx(float(ratios.mean()))
    assert metrics["clip_fraction"] == 0.0


def test_dppo_thresholds_are_configurable_per_direction() -> None:
    new, old = _logs(0.6, 0.2), _logs(0.3, 0.5)
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)
    mask = torch.ones(2, dtype=torch.bool)
    _, statistics = dppo_loss(new, old, advantages, mask, DPPOLossConfig(mask_high=0.35, mask_low=0.2))
    assert (float(statistics.masked_high), float(statistics.masked_low)) == (0.0, 1.0)
    _, statistics = dppo_loss(new, old, advantages, mask, DPPOLossConfig(mask_high=0.2, mask_low=0.35))
    assert (float(statistics.masked_high), float(statistics.masked_low)) == (1.0, 0.0)


def test_kl_penalty_is_the_squared_log_ratio_on_every_policy_token_including_dropped_ones() -> None:
    new = _logs(0.6, 0.25, 0.9)
    old = _logs(0.3, 0.25, 0.1)
    advantages = torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64)
    mask = torch.tensor([True, True, False])
    loss, statistics = dppo_loss(new, old, advantages, mask, DPPOLossConfig(kl_coef=0.5))
    # Token 0 is dropped (rose 0.3 with A > 0) but still pays the penalty; token 2 is not a policy token.
    penalty = math.log(2.0) ** 2
    pg = -1.0 * 1.0  # token 1: ratio 1, advantage 1
    assert float(loss) == pytest.approx((pg + 0.5 * penalty) / 2, rel=1e-12)
    assert float(statistics.kl_penalty) == pytest.approx(penalty)
    assert float(statistics.tokens) == 2
    # k3 estimate of KL on the policy tokens: r - log r - 1 = 2 - log 2 - 1 and 0.
    assert statistics.as_metrics()["mismatch_kl"] == pytest.approx((1 - math.log(2.0)) / 2)


def test_dropped_tokens_contribute_no_policy_gradient() -> None:
    new = _logs(0.6, 0.6, 0.2, 0.45).requires_grad_()
    old = _logs(0.3, 0.3, 0.5, 0.4)
    advantages = torch.tensor([1.0, -1.0, -1.0, 0.5], dtype=torch.float64)
    mask = torch.ones(4, dtype=torch.bool)
    loss, _ = dppo_loss(new, old, advantages, mask, DPPOLossConfig(kl_coef=0.0))
    loss.backward()
    assert new.grad is not None
    ratio = torch.exp(new.detach() - old)
    # d/dlogp of -A r / N is -A r / N for kept tokens (an importance-weighted policy gradient).
    expected = torch.tensor([0.0, 1.0 * ratio[1], 0.0, -0.5 * ratio[3]], dtype=torch.float64) / 4
    torch.testing.assert_close(new.grad, expected)


def test_with_the_penalty_dropped_tokens_get_only_its_gradient() -> None:
    new = _logs(0.6, 0.2).requires_grad_()
    old = _logs(0.3, 0.5)
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)
    mask = torch.ones(2, dtype=torch.bool)
    loss, _ = dppo_loss(new, old, advantages, mask, DPPOLossConfig(kl_coef=1e-3))
    loss.backward()
    assert new.grad is not None
    expected = 2 * 1e-3 * (new.detach() - old) / 2
    torch.testing.assert_close(new.grad, expected)


def test_padding_and_huge_ratios_on_dropped_tokens_leave_gradients_finite() -> None:
    new = torch.tensor([-0.01, -0.5, 3.0], dtype=torch.float32, requires_grad=True)
    old = torch.tensor([-200.0, -0.7, float("nan")])  # token 0: ratio overflows float32; token 2: padding
    advantages = torch.tensor([1.0, 1.0, float("nan")])
    mask = torch.tensor([True, True, False])
    loss, _ = dppo_loss(new, old, advantages, mask, DPPOLossConfig(kl_coef=0.0))
    loss.backward()
    assert new.grad is not None
    assert torch.isfinite(loss)
    assert torch.all(torch.isfinite(new.grad))
    assert float(new.grad[0]) == 0.0


def test_ppo_clip_matches_the_clipped_surrogate() -> None:
    new = _logs(0.6, 0.6, 0.2, 0.2, 0.33).requires_grad_()
    old = _logs(0.3, 0.3, 0.5, 0.5, 0.3)
    # ratios 2, 2, 0.4, 0.4, 1.1
    advantages = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    mask = torch.ones(5, dtype=torch.bool)
    loss, statistics = ppo_clip_loss(
        new, old, advantages, mask, PPOClipLossConfig(clip_low=0.2, clip_high=0.2)
    )
    # A>0, r=2: clipped at 1.2. A<0, r=2: -2 (unclipped is smaller). A<0, r=0.4: clipped at -0.8.
    # A>0, r=0.4: 0.4 (unclipped is smaller). A>0, r=1.1: inside the range.
    objective = [1.2, -2.0, -0.8, 0.4, 1.1]
    assert float(loss.detach()) == pytest.approx(-sum(objective) / 5, rel=1e-9)
    assert float(statistics.clipped) == 2
    assert statistics.as_metrics()["clip_fraction"] == pytest.approx(0.4)
    loss.backward()
    assert new.grad is not None
    ratio = torch.exp(new.detach() - old)
    expected = -torch.tensor([0.0, -ratio[1], 0.0, ratio[3], ratio[4]], dtype=torch.float64) / 5
    torch.testing.assert_close(new.grad, expected)


def test_ppo_clip_ranges_are_asymmetric_when_configured() -> None:
    new, old = _logs(0.39), _logs(0.3)  # ratio 1.3
    advantages = torch.ones(1, dtype=torch.float64)
    mask = torch.ones(1, dtype=torch.bool)
    loss, _ = ppo_clip_loss(new, old, advantages, mask, PPOClipLossConfig(clip_low=0.2, clip_high=0.28))
    assert float(loss) == pytest.approx(-1.28)


def test_ppo_clip_lower_side_uses_clip_low_not_clip_high() -> None:
    """A < 0 and r = 0.5: the objective is clipped at 1 - clip_low = 0.8 (not 1 - clip_high = 0.72)."""
    new, old = _logs(0.15), _logs(0.3)  # ratio 0.5
    advantages = -torch.ones(1, dtype=torch.float64)
    mask = torch.ones(1, dtype=torch.bool)
    loss, statistics = ppo_clip_loss(
        new, old, advantages, mask, PPOClipLossConfig(clip_low=0.2, clip_high=0.28)
    )
    assert float(loss) == pytest.approx(0.8)
    assert float(statistics.clipped) == 1


def test_loss_is_normalised_by_the_global_token_count_and_adds_up_over_pieces() -> None:
    generator = torch.Generator().manual_seed(0)
    new = -torch.rand(2, 6, generator=generator, dtype=torch.float64) * 3
    old = new + 0.3 * torch.randn(2, 6, generator=generator, dtype=torch.float64)
    advantages = torch.randn(2, 6, generator=generator, dtype=torch.float64)
    mask = torch.rand(2, 6, generator=generator) > 0.3
    config = DPPOLossConfig()
    full, full_statistics = dppo_loss(new, old, advantages, mask, config)
    total_tokens = float(mask.sum())
    first, first_statistics = dppo_loss(
        new[:1], old[:1], advantages[:1], mask[:1], config, num_tokens=total_tokens
    )
    second, second_statistics = dppo_loss(
        new[1:], old[1:], advantages[1:], mask[1:], config, num_tokens=total_tokens
    )
    assert float(first + second) == pytest.approx(float(full), rel=1e-12)
    combined = first_statistics + second_statistics
    torch.testing.assert_close(combined.as_tensor(), full_statistics.as_tensor())


def test_policy_loss_dispatches_on_the_discriminated_config() -> None:
    adapter = pydantic.TypeAdapter(PolicyLossConfig)
    dppo = adapter.validate_python({"kind": "dppo"})
    ppo = adapter.validate_python({"kind": "ppo_clip", "clip_high": 0.28})
    assert isinstance(dppo, DPPOLossConfig) and (dppo.mask_low, dppo.mask_high, dppo.kl_coef) == (
        0.2,
        0.2,
        1e-3,
    )
    assert isinstance(ppo, PPOClipLossConfig) and ppo.clip_high == 0.28
    new, old = _logs(0.6), _logs(0.3)
    advantages, mask = torch.ones(1, dtype=torch.float64), torch.ones(1, dtype=torch.bool)
    dppo_value, _ = policy_loss(new, old, advantages, mask, dppo)
    ppo_value, _ = policy_loss(new, old, advantages, mask, ppo)
    assert float(dppo_value) == pytest.approx(1e-3 * math.log(2.0) ** 2)  # dropped: penalty only
    assert float(ppo_value) == pytest.approx(-1.28)


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "dppo", "mask_high": -0.1},
        {"kind": "dppo", "kl_coeff": 0.1},
        {"kind": "ppo_clip", "clip_low": 1.5},
        {"kind": "trpo"},
    ],
)
def test_invalid_loss_configs_are_rejected(raw: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        pydantic.TypeAdapter(PolicyLossConfig).validate_python(raw)


def test_mismatched_shapes_and_empty_normaliser_raise_clear_errors() -> None:
    new, old = torch.zeros(3), torch.zeros(2)
    with pytest.raises(ValueError, match="old_logprobs"):
        dppo_loss(new, old, torch.zeros(3), torch.ones(3, dtype=torch.bool), DPPOLossConfig())
    with pytest.raises(ValueError, match="bool"):
        dppo_loss(new, new, torch.zeros(3), torch.ones(3), DPPOLossConfig())
    with pytest.raises(ValueError, match="num_tokens"):
        dppo_loss(new, new, torch.zeros(3), torch.zeros(3, dtype=torch.bool), DPPOLossConfig())
