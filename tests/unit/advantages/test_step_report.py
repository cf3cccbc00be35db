"""Each estimator reports its own step metrics: what this batch used and what it fitted for the next."""

import numpy as np

from lecritique.advantages import AdvantageBatch, estimator_gauges, get_estimator

R = np.array([1.0, 0.0, 1.0, 0.0])
G = np.array([0, 0, 1, 1])
M = np.ones((4, 3), dtype=bool)
V = np.array([[0.9] * 3, [0.2] * 3, [0.6] * 3, [0.5] * 3])


def test_tether_reports_the_rho_it_used_and_the_rho_it_fitted():
    tether = get_estimator("tether", ema_decay=0.5, buckets=2, max_length=3, initial_rho=0.25)
    advantages, metrics = tether.freeze_and_fit(AdvantageBatch(R, G, M, values=V))
    assert (
        metrics["tether_rho"] == 0.25
        and metrics["tether_rho_bucket_0"] == metrics["tether_rho_bucket_1"] == 0.25
    )
    assert metrics["tether_rho_fitted"] == float(tether.rho.mean()) != 0.25
    np.testing.assert_allclose(
        advantages,
        get_estimator("tether", buckets=2, max_length=3, initial_rho=0.25).compute(
            AdvantageBatch(R, G, M, values=V)
        ),
    )
    _, second = tether.freeze_and_fit(AdvantageBatch(R, G, M, values=V))
    assert second["tether_rho"] == metrics["tether_rho_fitted"]


def test_other_estimators_report_their_fitted_state():
    evpo = get_estimator("evpo")
    _, metrics = evpo.freeze_and_fit(AdvantageBatch(R, G, M, values=V))
    assert metrics == {
        "evpo_uses_critic": 1.0
    }  # this batch's explained variance is positive: the next uses the critic
    assert get_estimator("rloo").freeze_and_fit(AdvantageBatch(R, G, M))[1] == {}


def test_estimators_declare_their_gauges():
    assert estimator_gauges() == {
        "tether_rho": "TETHER coefficient used for the last batch",
    }
