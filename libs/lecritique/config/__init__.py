"""Typed experiment specs (pydantic): YAML on disk, JSON over REST, one spec for both modes."""

from lecritique.config.estimators import EstimatorSpec
from lecritique.config.experiment import (
    ExperimentSpec,
    OrchestratorSpec,
    PolicyModelSpec,
    PolicyTrainerSpec,
    RolloutSpec,
    SamplingSpec,
    SpecError,
    load_spec,
    parse_spec,
)
from lecritique.critics.specs import CriticSpec
from lecritique.replay.config import ReplayBounds as ReplaySpec

__all__ = [
    "CriticSpec",
    "EstimatorSpec",
    "ExperimentSpec",
    "OrchestratorSpec",
    "PolicyModelSpec",
    "PolicyTrainerSpec",
    "ReplaySpec",
    "RolloutSpec",
    "SamplingSpec",
    "SpecError",
    "load_spec",
    "parse_spec",
]
