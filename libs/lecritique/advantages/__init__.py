"""Advantage estimators and critic metrics: pure functions over token-level arrays, no I/O.

>>> from lecritique.advantages import AdvantageBatch, get_estimator
>>> est = get_estimator("tether", ema_decay=0.95)
>>> adv = est.compute(batch)   # frozen with the coefficient fitted on earlier batches
>>> est.update(batch)          # then fit on this batch, for the next one

Value losses need torch and live in :mod:`lecritique.advantages.losses`.
"""

from lecritique.advantages import estimators as _estimators  # noqa: F401  (registers the estimators)
from lecritique.advantages.base import (
    AdvantageEstimator,
    EstimatorSpecBase,
    estimator_class,
    estimator_classes,
    estimator_gauges,
    estimator_names,
    get_estimator,
)
from lecritique.advantages.batch import AdvantageBatch
from lecritique.advantages.estimators import (
    EVPOEstimator,
    GAEEstimator,
    LVRLEstimator,
    MeanEstimator,
    RLOOEstimator,
    ValueEstimator,
    critic_free_advantages,
)
from lecritique.advantages.groups import leave_one_out_mean
from lecritique.advantages.metrics import (
    explained_variance,
    explained_variance_per_bucket,
    top1_ranking_accuracy,
    value_mse,
)
from lecritique.advantages.positions import position_buckets, response_positions
from lecritique.advantages.returns import length_calibrated_lambda
from lecritique.advantages.tether import TetherEstimator

__all__ = [
    "AdvantageBatch",
    "AdvantageEstimator",
    "EVPOEstimator",
    "EstimatorSpecBase",
    "GAEEstimator",
    "LVRLEstimator",
    "MeanEstimator",
    "RLOOEstimator",
    "TetherEstimator",
    "ValueEstimator",
    "critic_free_advantages",
    "estimator_class",
    "estimator_classes",
    "estimator_gauges",
    "estimator_names",
    "explained_variance",
    "explained_variance_per_bucket",
    "get_estimator",
    "leave_one_out_mean",
    "length_calibrated_lambda",
    "position_buckets",
    "response_positions",
    "top1_ranking_accuracy",
    "value_mse",
]
