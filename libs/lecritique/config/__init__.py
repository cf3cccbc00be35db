"""Typed experiment specs (pydantic): YAML on disk, JSON over REST, one spec for both modes."""

from lecritique.config.experiment import (
    CriticSpec,
    EstimatorSpec,
    ExperimentSpec,
    OrchestratorSpec,
    PolicyModelSpec,
    PolicyTrainerSpec,
    ReplaySpec,
    RolloutSpec,
    SamplingSpec,
    SpecError,
    load_spec,
    parse_spec,
)

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
