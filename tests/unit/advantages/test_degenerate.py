"""Degenerate input: well-defined answers where they exist, a ValueError naming the field otherwise."""

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch, estimator_names, get_estimator

R = np.array([1.0, 0.0])
G = np.array([0, 0])
M = np.ones((2, 3))
V = np.full((2, 3), 0.5)


def test_all_equal_rewards_give_zero_group_advantages_and_no_nan():
    batch = AdvantageBatch(np.ones(4), np.array([0, 0, 1, 1]), np.ones((4, 3)), values=np.full((4, 3), 0.5))
    for name in ("mean", "rloo"):
        assert np.all(get_estimator(name).compute(batch) == 0)
    assert np.all(get_estimator("mean", normalize_std=True).compute(batch) == 0)
    for name in estimator_names():
        options = {}
        step_batch = AdvantageBatch(
            batch.rewards,
            batch.group_ids,
            batch.mask,
            values=batch.values,
            step_ids=np.zeros((4, 3), dtype=int),
        )
        estimator = get_estimator(name, **options)
        assert np.all(np.isfinite(estimator.compute(step_batch))), name
        estimator.update(step_batch)
        assert np.all(np.isfinite(estimator.compute(step_batch))), name


def test_all_masked_row_is_rejected_naming_mask():
    mask = np.ones((2, 3))
    mask[1] = 0
    with pytest.raises(ValueError, match="mask.*row 1"):
        AdvantageBatch(R, G, mask)


@pytest.mark.parametrize("field", ["rewards", "values"])
def test_nan_is_rejected_naming_the_field(field):
    rewards, values = R.copy(), V.copy()
    if field == "rewards":
        rewards[0] = np.nan
    else:
        values[1, 2] = np.nan
    with pytest.raises(ValueError, match=field):
        AdvantageBatch(rewards, G, M, values=values)


def test_nan_on_padding_is_ignored():
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    values = np.array([[0.2, 0.3, np.nan], [0.4, np.nan, np.nan]])
    adv = get_estimator("value").compute(AdvantageBatch(R, G, mask, values=values))
    assert np.all(np.isfinite(adv))
    assert adv[0, 2] == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rewards": np.ones((2, 1))}, "rewards"),
        ({"group_ids": np.array([0, 0, 0])}, "group_ids"),
        ({"group_ids": np.array([0.5, 1.0])}, "group_ids"),
        ({"mask": np.ones(2)}, "mask"),
        ({"mask": np.full((2, 3), 2)}, "mask"),
        ({"values": np.ones((2, 4))}, "values"),
        ({"step_ids": np.ones((3, 3), dtype=int)}, "step_ids"),
    ],
)
def test_mismatched_shapes_and_types_name_the_field(kwargs, field):
    fields = {"rewards": R, "group_ids": G, "mask": M, "values": V} | kwargs
    with pytest.raises(ValueError, match=field):
        AdvantageBatch(**fields)


@pytest.mark.parametrize("name", ["value", "gae", "tether", "evpo", "lvrl"])
def test_critic_estimators_require_values(name):
    batch = AdvantageBatch(R, G, M, step_ids=np.zeros((2, 3), dtype=int))
    estimator = get_estimator(name)
    with pytest.raises(ValueError, match="values"):
        estimator.compute(batch) if name != "evpo" else estimator.update(batch)


def test_lvrl_requires_step_ids():
    with pytest.raises(ValueError, match="step_ids"):
        get_estimator("lvrl").compute(AdvantageBatch(R, G, M, values=V))


@pytest.mark.parametrize("name", ["rloo", "tether"])
def test_singleton_group_is_a_clear_error(name):
    batch = AdvantageBatch(
        np.array([1.0, 0.0, 1.0]), np.array([0, 0, 5]), np.ones((3, 2)), values=np.zeros((3, 2))
    )
    with pytest.raises(ValueError, match="group_ids.*group 5 has 1"):
        get_estimator(name).compute(batch)


def test_unknown_estimator_and_options_are_named():
    with pytest.raises(ValueError, match="'nope'"):
        get_estimator("nope")
    with pytest.raises(ValueError, match="tether.*ema"):
        get_estimator("tether", ema=0.9)
    with pytest.raises(ValueError, match="ema_decay"):
        get_estimator("tether", ema_decay=1.5)


def test_state_dict_round_trip_and_validation():
    estimator = get_estimator("tether", buckets=2, max_length=3)
    estimator.update(AdvantageBatch(R, G, M, values=np.array([[0.9, 0.9, 0.9], [0.1, 0.1, 0.1]])))
    restored = get_estimator("tether", buckets=2, max_length=3)
    restored.load_state_dict(estimator.state_dict())
    np.testing.assert_array_equal(restored.rho, estimator.rho)
    assert restored.updates == 1
    with pytest.raises(ValueError, match="bucket"):
        get_estimator("tether", buckets=3, max_length=3).load_state_dict(estimator.state_dict())
    evpo = get_estimator("evpo")
    evpo.update(AdvantageBatch(R, G, M, values=V))
    other = get_estimator("evpo")
    other.load_state_dict(evpo.state_dict())
    assert other.previous_explained_variance == evpo.previous_explained_variance
    with pytest.raises(ValueError, match="no state"):
        get_estimator("rloo").load_state_dict({"rho": [0.1]})
