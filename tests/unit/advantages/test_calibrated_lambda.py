"""Length-calibrated lambda (Le Critique §7.2): lambda = 0.4^(1/L), L the maximum response length."""

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch, get_estimator, length_calibrated_lambda


def test_the_papers_value_for_8192_token_responses():
    assert length_calibrated_lambda(8192) == pytest.approx(0.999888, abs=5e-7)
    assert length_calibrated_lambda(8192) ** 8192 == pytest.approx(0.4)
    assert length_calibrated_lambda(1) == pytest.approx(0.4)


def test_auto_resolves_both_lambdas_and_reports_them():
    estimator = get_estimator("gae", lambda_gae="auto", lambda_target="auto", max_length=64)
    assert estimator.lambda_gae == estimator.lambda_target == pytest.approx(0.4 ** (1 / 64))
    assert estimator.metrics() == {
        "gae_lambda": estimator.lambda_gae,
        "gae_lambda_target": estimator.lambda_target,
    }
    fixed = get_estimator("gae", lambda_gae=0.9, lambda_target="auto", max_length=64)
    assert fixed.lambda_gae == 0.9 and fixed.lambda_target == pytest.approx(0.4 ** (1 / 64))


def test_the_first_token_of_a_longest_response_keeps_about_forty_percent_of_the_return():
    length = 64
    estimator = get_estimator("gae", lambda_gae="auto", max_length=length)
    # V = 0: every TD residual is 0 but the last one (R = 1), so A_t = lambda^(L - 1 - t).
    batch = AdvantageBatch(np.array([1.0]), np.array([0]), np.ones((1, length)), values=np.zeros((1, length)))
    advantages = estimator.compute(batch)[0]
    assert advantages[-1] == pytest.approx(1.0)
    assert advantages[0] == pytest.approx(estimator.lambda_gae ** (length - 1))
    assert advantages[0] == pytest.approx(0.4, rel=0.02)
    targets = get_estimator("gae", lambda_target="auto", max_length=length).value_targets(batch)[0]
    np.testing.assert_allclose(targets, advantages, rtol=1e-6)  # V = 0: targets equal the advantages


def test_auto_needs_the_maximum_length_and_other_words_are_refused():
    with pytest.raises(ValueError, match="lambda_gae 'auto' needs max_length"):
        get_estimator("gae", lambda_gae="auto")
    with pytest.raises(ValueError, match="lambda_target.*'auto'"):
        get_estimator("gae", lambda_target="calibrated", max_length=8)
    with pytest.raises(ValueError, match="max_length.*greater than or equal to 1"):
        get_estimator("gae", lambda_gae="auto", max_length=0)
