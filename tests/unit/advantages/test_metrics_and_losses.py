import math

import numpy as np
import pytest
import torch

from lecritique.advantages import explained_variance, top1_ranking_accuracy, value_mse
from lecritique.advantages.losses import bce_value_loss, mse_value_loss, value_loss


def test_explained_variance_definition():
    returns = np.array([1.0, 0.0, 1.0, 0.0])
    assert explained_variance(returns[:, None], returns) == pytest.approx(1.0)
    assert explained_variance(np.full((4, 1), 0.5), returns) == pytest.approx(0.0)
    values = np.array([[0.8], [0.1], [0.6], [0.3]])
    expected = 1 - np.var(returns - values[:, 0]) / np.var(returns)
    assert explained_variance(values, returns) == pytest.approx(expected)


def test_explained_variance_respects_mask():
    returns = np.array([1.0, 0.0])
    values = np.array([[1.0, 123.0], [0.0, -50.0]])
    mask = np.array([[1, 0], [1, 0]])
    assert explained_variance(values, returns, mask) == pytest.approx(1.0)


def test_explained_variance_undefined_is_nan():
    assert math.isnan(explained_variance(np.zeros((3, 2)), np.ones(3)))
    assert math.isnan(explained_variance(np.zeros((2, 2)), np.array([1.0, 0.0]), np.zeros((2, 2))))
    with pytest.raises(ValueError, match="returns"):
        explained_variance(np.zeros((2, 2)), np.ones(3))


def test_value_mse_and_ranking():
    assert value_mse(np.array([0.5, 1.0]), np.array([0.0, 1.0])) == pytest.approx(0.125)
    predicted = np.array([[0.1, 0.9], [0.7, 0.2], [0.5, 0.4]])
    true = np.array([[0.0, 1.0], [0.0, 1.0], [0.6, 0.5]])
    assert top1_ranking_accuracy(predicted, true) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="k >= 2"):
        top1_ranking_accuracy(np.zeros((2, 1)), np.zeros((2, 1)))


def test_ties_for_the_best_candidate_are_not_hits():
    true = np.array([[0.0, 1.0, 0.5], [0.2, 0.9, 0.1]])
    constant = np.full((2, 3), 0.5)  # argmax would pick candidate 0; a constant critic ranks nothing
    assert top1_ranking_accuracy(constant, true[:, ::-1]) == 0.0
    assert top1_ranking_accuracy(np.array([[0.1, 0.9, 0.9], [0.0, 1.0, 0.0]]), true) == pytest.approx(1 / 2)
    tied_truth = np.array([[0.5, 0.5, 0.0]])  # no single best candidate
    assert top1_ranking_accuracy(np.array([[0.9, 0.1, 0.0]]), tied_truth) == 0.0


def test_bce_loss_matches_manual_and_ignores_masked_tokens():
    logits = torch.tensor([[0.0, 2.0, 100.0]])
    targets = torch.tensor([[1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    manual = -(math.log(0.5) + math.log(1 - 1 / (1 + math.exp(-2.0)))) / 2
    assert bce_value_loss(logits, targets, mask).item() == pytest.approx(manual, rel=1e-6)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bce_value_loss(logits, targets * 2, mask)


def test_mse_loss_and_dispatch():
    values = torch.tensor([[0.5, 0.0]], requires_grad=True)
    loss = value_loss("mse", values, torch.tensor([[1.0, 3.0]]), torch.tensor([[1, 0]]))
    assert loss.item() == pytest.approx(0.25)
    loss.backward()
    assert values.grad[0, 1] == 0
    assert mse_value_loss(values, torch.zeros(1, 2), torch.ones(1, 2)).item() == pytest.approx(0.125)
    with pytest.raises(ValueError, match="huber"):
        value_loss("huber", values, values, torch.ones(1, 2))
    with pytest.raises(ValueError, match="no tokens"):
        value_loss("mse", values, values, torch.zeros(1, 2))
