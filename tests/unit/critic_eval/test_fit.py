"""The critic's error against Monte-Carlo values, taken apart: bias, correlation, spread."""

import numpy as np
import pytest

from lecritique.advantages import value_mse
from lecritique.critic_eval.scores import fit_decomposition


def test_the_three_parts_add_up_to_the_mse():
    rng = np.random.default_rng(0)
    mc = rng.uniform(0, 1, 500)
    predicted = 0.3 + 0.4 * mc + rng.normal(0, 0.2, 500)
    fit = fit_decomposition(predicted, mc)
    sd_m = np.std(mc)
    parts = fit["bias"] ** 2 + (fit["spread"] * sd_m - fit["correlation"] * sd_m) ** 2
    parts += (1 - fit["correlation"] ** 2) * sd_m**2
    assert parts == pytest.approx(value_mse(predicted, mc), rel=1e-9)


def test_a_lagging_critic_is_all_bias_and_a_blind_one_has_no_correlation():
    mc = np.linspace(0.0, 1.0, 101)
    lagging = fit_decomposition(mc - 0.2, mc)
    assert lagging["bias"] == pytest.approx(-0.2)
    assert lagging["correlation"] == pytest.approx(1.0) and lagging["spread"] == pytest.approx(1.0)
    blind = fit_decomposition(np.random.default_rng(1).permutation(mc), mc)
    assert abs(blind["correlation"]) < 0.2
    constant = fit_decomposition(np.full(101, 0.5), mc)
    assert (
        np.isnan(constant["correlation"])
        and constant["spread"] == 0.0
        and constant["bias"] == pytest.approx(0.0)
    )
    assert all(np.isnan(v) for v in fit_decomposition(np.array([]), np.array([])).values())
