"""Spec validation derives from the facts each estimator declares on its class (issue 27)."""

from typing import ClassVar, Literal

import pytest

from lecritique.advantages import AdvantageBatch, estimator_classes
from lecritique.advantages.base import _REGISTRY, AdvantageEstimator, EstimatorSpecBase, register
from lecritique.config import SpecError, parse_spec

BASE = {
    "name": "facts",
    "environment": {"kind": "arithmetic"},
    "policy": {"path": "/m"},
}
GROUP_ESTIMATORS = sorted(cls.name for cls in estimator_classes() if cls.min_group_size > 1)


def _spec(estimator, group_size, critic=None):
    critic = critic if critic is not None else {}
    return parse_spec(
        {**BASE, "estimator": {"name": estimator}, "rollout": {"group_size": group_size}, "critic": critic}
    )


def test_the_estimators_that_need_groups_are_the_issue_s_four():
    assert GROUP_ESTIMATORS == ["lvrl", "mean", "rloo", "tether"]


@pytest.mark.parametrize("estimator", GROUP_ESTIMATORS)
def test_a_group_of_one_that_trains_nothing_is_refused_naming_fields_and_reason(estimator):
    """Finding 3: ``mean`` with group_size 1 validated on main, and every advantage was R - R = 0."""
    critic = {"kind": "frozen_llm"} if estimator == "lvrl" else {}
    with pytest.raises(SpecError) as error:
        _spec(estimator, 1, critic)
    message = str(error.value)
    assert "rollout.group_size must be >= 2" in message and f"estimator.name {estimator!r}" in message
    assert "trains nothing" in message


def test_the_mean_estimator_with_a_group_of_one_really_trains_nothing():
    """The reason the refusal gives is true: every advantage is 0."""
    batch = AdvantageBatch(rewards=[1.0, 0.0, 1.0], mask=[[True, True]] * 3, group_ids=[0, 1, 2])
    assert not _spec("mean", 2).estimator.build().compute(batch).any()


@pytest.mark.parametrize("estimator", ["value", "gae", "evpo"])
def test_estimators_without_a_group_baseline_accept_a_group_of_one(estimator):
    assert _spec(estimator, 1).rollout.group_size == 1


def test_a_new_critic_estimator_is_refused_a_hindsight_critic_by_default():
    """Admission is the estimator's declaration (default: prefix-only values), not a list of names."""

    class ProbeSpec(EstimatorSpecBase):
        name: Literal["probe-facts"] = "probe-facts"
        """A test estimator."""

    class ProbeEstimator(AdvantageEstimator):
        name: ClassVar[str] = "probe-facts"
        Spec = ProbeSpec
        uses_critic = True

        def _token_advantages(self, batch):
            return batch.rewards[:, None] - batch.require_values(self.name)

    from lecritique.critics.kinds import critic_kind
    from lecritique.critics.specs import FrozenLLMCriticSpec

    register(ProbeEstimator)
    try:
        hindsight = FrozenLLMCriticSpec()
        assert "eq. 5" in critic_kind(hindsight).refusal(hindsight, ProbeEstimator)
        prefix = FrozenLLMCriticSpec(hindsight=False)
        assert critic_kind(prefix).refusal(prefix, ProbeEstimator) is None
    finally:
        del _REGISTRY["probe-facts"]


def test_register_refuses_a_spec_whose_name_disagrees():
    class WrongSpec(EstimatorSpecBase):
        name: Literal["other"] = "other"

    class Wrong(AdvantageEstimator):
        name: ClassVar[str] = "wrong"
        Spec = WrongSpec

        def _token_advantages(self, batch):
            return batch.rewards[:, None]

    with pytest.raises(TypeError, match="Literal"):
        register(Wrong)
    assert "wrong" not in _REGISTRY
