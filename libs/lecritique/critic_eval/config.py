"""The ``critic-eval`` spec: a fixed policy, a task, and the critics to compare on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from lecritique.config.base import SpecModel
from lecritique.config.documents import SpecError, read_document, validation_message
from lecritique.config.experiment import PolicyModelSpec, SamplingSpec
from lecritique.config.probe import FixedPolicyProbe
from lecritique.critics.config import SegmentsConfig
from lecritique.critics.kinds import critic_kind
from lecritique.critics.specs import CriticSpec, default_critic_kind
from lecritique.engines.config import EngineConfig, HFEngineConfig
from lecritique.envs import EnvironmentConfig
from lecritique.envs.base import Split


class EvaluatedCritic(SpecModel):
    """One critic to measure."""

    name: str
    """Label in the table and the plot (e.g. ``vf``, ``pvf``, ``genac``, ``lvrl``)."""
    critic: CriticSpec
    """The critic, exactly as in an experiment spec (``kind`` selects it; default discriminative)."""
    path: str | None = None
    """Trained weights (a published critic version); None: the untrained critic initialised from the policy."""

    @field_validator("critic", mode="before")
    @classmethod
    def _default_kind(cls, value: Any) -> Any:
        return default_critic_kind(value)

    def scored_critic(self, segments: SegmentsConfig) -> CriticSpec:
        """The critic as measured: critic-eval's segmentation (every critic scores the same states),
        and values from the cut prefix h_t unless the critic sets ``hindsight: true`` itself."""
        critic = self.critic
        if "segments" in type(critic).model_fields:
            critic = critic.model_copy(update={"segments": segments})
        if "hindsight" not in self.critic.model_fields_set:
            critic = critic_kind(critic).prefix_only(critic)
        return critic

    def scored_on(self, segments: SegmentsConfig) -> str:
        """``hindsight`` (the whole episode) or ``prefix`` (the cut prefix): what the report says."""
        critic = self.scored_critic(segments)
        return "hindsight" if critic_kind(critic).hindsight(critic) else "prefix"

    @model_validator(mode="after")
    def _frozen_has_no_weights(self) -> EvaluatedCritic:
        if not critic_kind(self.critic).trained and self.path is not None:
            raise ValueError(
                f"critic {self.name!r}: a {self.critic.kind} critic has no weights; remove 'path'"
            )
        return self


class CriticEvalSpec(FixedPolicyProbe):
    """Measure critics against Monte-Carlo values of a fixed policy (GenAC §6.3): ``tasks`` x
    ``group_size`` episodes, ``states`` cut at their segment starts, ``continuations`` (M) each for
    the true values (:class:`FixedPolicyProbe`; defaults: the ``critic-eval`` row of
    :mod:`lecritique.config.probe`)."""

    probe_context = "critic-eval"

    policy: PolicyModelSpec
    """The fixed policy checkpoint whose values are estimated."""
    environment: EnvironmentConfig
    """Task suite the states come from."""
    engine: EngineConfig = Field(default_factory=lambda: HFEngineConfig(kind="hf"))
    """Inference backend of the policy's rollouts (its model path is the policy's)."""
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    """Sampling of the policy (as in the experiment being analysed)."""
    split: Split = "eval"
    """Task split the states come from."""
    ranking_k: list[int] = Field(default_factory=lambda: [2, 4, 8])
    """Candidate next segments per ranking state (pairwise and top-1 accuracy for each k)."""
    ranking_states: int = Field(default=16, ge=0)
    """States used for the ranking probe (each costs max(k) x M continuations)."""
    ranking_oversample: int = Field(default=4, ge=1)
    """Draws per needed candidate: continuations that end the episode are not candidates."""
    segments: SegmentsConfig = Field(default_factory=lambda: SegmentsConfig(rule="sentence", max_segments=64))
    """Where states are cut, for every critic alike (overrides the text critics' own rule)."""
    position_edges: list[int] = Field(default_factory=lambda: [1, 3])
    """Response-position buckets of the ceiling table: [1, 3] gives t = 0 (prompt end), 1-2, 3+."""
    critics: list[EvaluatedCritic] = Field(min_length=1)
    """The critics to compare."""
    seed: int = 0
    """Seed of task sampling, rollouts and state selection."""
    icc_episodes: int = Field(default=16, ge=0, le=100_000)
    """Episodes, on tasks sampled apart from the evaluated ones, whose mean reward In-Context
    Conditioning shows as the actor's average (never the evaluated episodes' own success rate)."""
    icc_reward_average: float | None = Field(default=None, ge=0.0, le=1.0)
    """The actor's average shown instead (None: measured on ``icc_episodes``; with 0 episodes, the
    first critic's ``initial_reward_average``)."""

    @field_validator("ranking_k")
    @classmethod
    def _k_at_least_two(cls, values: list[int]) -> list[int]:
        if any(k < 2 for k in values):
            raise ValueError(f"every ranking k must be >= 2, got {values}")
        return sorted(set(values))

    @field_validator("position_edges")
    @classmethod
    def _increasing_edges(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values) or sorted(set(values)) != values:
            raise ValueError(f"position_edges must be increasing positive integers, got {values}")
        return values

    @model_validator(mode="after")
    def _unique_names(self) -> CriticEvalSpec:
        names = [c.name for c in self.critics]
        if len(set(names)) != len(names):
            raise ValueError(f"critic names must be unique, got {names}")
        return self


def load_critic_eval_spec(path: str | Path) -> CriticEvalSpec:
    """Read and validate a YAML critic-eval spec; :class:`SpecError` names every bad field."""
    path = Path(path)
    data = read_document(path, "critic-eval spec")
    _refuse_experiment_spec(path, data)
    try:
        return CriticEvalSpec.model_validate(data)
    except ValidationError as error:
        # The experiment spec's error layout: one line per offending field, named by its path.
        raise SpecError(validation_message(error, CriticEvalSpec, "critic-eval spec")) from None


EXPERIMENT_ONLY = ("rollout", "estimator", "orchestrator", "critic", "policy_trainer", "name")
"""Top-level fields of an experiment spec that a critic-eval spec never has."""


def _refuse_experiment_spec(path: Path, data: object) -> None:
    """An experiment spec given to critic-eval is answered with what to do, not a list of unknown fields."""
    if not isinstance(data, dict) or "critics" in data:
        return
    found = [key for key in EXPERIMENT_ONLY if key in data]
    if len(found) >= 2:
        raise SpecError(
            f"{path} is an experiment spec (it has {', '.join(found)}), not a critic-eval spec. To measure the "
            f"critic of a run of it: lecritique critic-eval --run RUN_DIR --out DIR (RUN_DIR: the run's --out folder). "
            "To compare critics on a fixed policy, write a critic-eval spec (policy, environment, critics: [...]; "
            "see examples/critics/critic-eval-sudoku-mini.yml and docs/critics.md)."
        )
