"""The spec's ``estimator`` section: a discriminated union on ``name`` of every registered estimator's ``Spec``.

Nothing about an estimator is declared here: its options, defaults and bounds are its ``Spec``,
declared next to the estimator class (:mod:`lecritique.advantages.base`), and the union is
derived from the registry, so a new registered estimator is a valid ``estimator.name`` at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from lecritique.advantages import estimator_classes
from lecritique.advantages.base import EstimatorSpecBase
from lecritique.advantages.estimators import EVPOSpec, GAESpec, LVRLSpec, MeanSpec, RLOOSpec, ValueSpec
from lecritique.advantages.tether import TetherSpec

__all__ = [
    "EVPOSpec",
    "EstimatorSpec",
    "EstimatorSpecBase",
    "GAESpec",
    "LVRLSpec",
    "MeanSpec",
    "RLOOSpec",
    "TetherSpec",
    "ValueSpec",
]

if TYPE_CHECKING:
    EstimatorSpec = EstimatorSpecBase
else:
    EstimatorSpec = Annotated[
        Union[tuple(cls.Spec for cls in estimator_classes())],  # noqa: UP007 - built from the registry
        Field(discriminator="name"),
    ]
"""Every registered estimator's spec section, selected by ``name``."""
