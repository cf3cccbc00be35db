"""The orchestrator's estimator step, ``AdvantageEstimator.freeze_and_fit``: advantages first, then the fit.

Le Critique §5.1: batch k's advantages use rho_{k-1}; only afterwards is rho fitted on batch k.
The check below is run on the real method and on the reversed order, which must fail it.
"""

import copy
from typing import Any

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch, get_estimator
from lecritique.advantages.base import AdvantageEstimator


def fit_then_freeze(estimator: AdvantageEstimator, batch: AdvantageBatch) -> tuple[Any, dict[str, float]]:
    """The forbidden order: the batch's advantages use a state fitted on its own returns."""
    estimator.update(batch)
    return estimator.compute(batch), estimator.metrics()


def freeze_and_fit(estimator: AdvantageEstimator, batch: AdvantageBatch) -> tuple[Any, dict[str, float]]:
    return estimator.freeze_and_fit(batch)


def tether_batch():
    # B^LOO = (0, 1); V = R on every token, so the fit moves rho from 0 to 1 - d.
    return AdvantageBatch(
        np.array([1.0, 0.0]), np.array([0, 0]), np.ones((2, 3)), values=np.array([[1.0] * 3, [0.0] * 3])
    )


def assert_frozen_before_fit(apply) -> None:
    estimator = get_estimator("tether", ema_decay=0.5, buckets=3, max_length=3, initial_rho=0.0)
    batch = tether_batch()
    before = copy.deepcopy(estimator)
    advantages, metrics = apply(estimator, batch)
    np.testing.assert_allclose(advantages, before.compute(batch))
    np.testing.assert_allclose(estimator.rho, [0.5, 0.5, 0.5])  # fitted, for the next batch
    assert metrics["tether_rho"] == 0.0  # the coefficient these advantages used
    assert metrics["tether_rho_bucket_2"] == 0.0
    assert metrics["tether_rho_fitted"] == pytest.approx(0.5)


def test_freeze_and_fit_computes_with_the_state_fitted_on_earlier_batches():
    assert_frozen_before_fit(freeze_and_fit)


def test_the_reversed_order_fails_the_same_check():
    with pytest.raises(AssertionError):
        assert_frozen_before_fit(fit_then_freeze)


class RecordingEstimator(AdvantageEstimator):
    """Counts its fits; its advantages say how many fits preceded them."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _token_advantages(self, batch):
        self.calls.append("compute")
        return np.full(batch.mask.shape, float(self.calls.count("update")))

    def update(self, batch):
        self.calls.append("update")


def test_every_estimator_is_computed_once_then_fitted_once():
    estimator = RecordingEstimator()
    advantages, _ = estimator.freeze_and_fit(tether_batch())
    assert estimator.calls == ["compute", "update"]
    assert np.all(advantages == 0.0)
