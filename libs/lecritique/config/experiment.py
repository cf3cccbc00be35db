"""The experiment spec: one typed document for local runs (YAML) and the REST API (JSON).

Every section forbids unknown fields, so a typo fails before any process starts, with an error
that names the field's full path (e.g. ``critic.replay.capcity``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from lecritique.config.base import SpecModel
from lecritique.config.estimators import EstimatorSpec, TetherSpec
from lecritique.config.placement import PlacementSpec
from lecritique.critics.kinds import critic_kind
from lecritique.critics.specs import CriticSpec, TrainedCriticSpec, default_critic_kind
from lecritique.engines.config import EngineConfig, HFEngineConfig
from lecritique.envs import EnvironmentConfig, environment_turn_limit
from lecritique.models.templates import PlainTemplateConfig, TemplateConfig
from lecritique.training.config import PolicyTrainerConfig

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$")


class SpecError(ValueError):
    """An invalid experiment spec; the message names every offending field."""


class PolicyModelSpec(SpecModel):
    path: str | None = None
    """Hugging Face model directory of the initial policy."""
    tiny: str | None = None
    """Or: a tiny CPU model built (and cached) by ``lecritique models build-tiny --task`` this name."""
    template: TemplateConfig = Field(default_factory=PlainTemplateConfig)
    """How prompts and turns are rendered: ``plain`` concatenation or the tokenizer's ``chat`` template."""

    @model_validator(mode="after")
    def _exactly_one_source(self) -> PolicyModelSpec:
        if (self.path is None) == (self.tiny is None):
            raise ValueError("set exactly one of 'path' and 'tiny'")
        return self


class SamplingSpec(SpecModel):
    temperature: float = Field(default=1.0, gt=0.0)
    """Sampling temperature of rollouts (the paper: 1.0)."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_tokens: int = Field(default=32, ge=1)
    """Most tokens of one policy turn."""


class RolloutSpec(SpecModel):
    engine: EngineConfig = Field(default_factory=lambda: HFEngineConfig(kind="hf"))
    """Inference backend (``hf`` or ``vllm``); its model path is filled in at launch."""
    replicas: int = Field(default=1, ge=1)
    """Rollout service replicas; the orchestrator spreads requests across them."""
    group_size: int = Field(default=4, ge=1)
    """K: episodes sampled per task."""
    tasks_per_step: int = Field(default=32, ge=1)
    """Tasks per policy batch (batch size = tasks_per_step x group_size)."""
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    """Sampling parameters of policy turns."""


class PolicyTrainerSpec(PolicyTrainerConfig):
    """Policy optimisation (loss, AdamW) and its process layout."""

    processes: int = Field(default=1, ge=1)
    """torch.distributed processes (torchrun --nproc_per_node) of the policy trainer."""


class OrchestratorSpec(SpecModel):
    steps: int = Field(default=100, ge=1)
    """Policy updates to run."""
    max_off_policy_steps: int = Field(default=8, ge=0)
    """Drop rollouts generated more than this many policy versions ago (Table 1: 8)."""
    prefetch_batches: int = Field(default=1, ge=0)
    """Batches queued ahead of the policy loop; at most ``prefetch_batches + 1`` are in flight
    (rolling out, evaluating or queued). 0: strictly on-policy, no overlap."""
    eval_every: int | None = Field(default=None, ge=1)
    """Greedy success (reward >= 1) on held-out eval-split tasks every this many steps, after the
    step's weights are loaded (None: never); ``eval_success`` in the metrics."""
    eval_tasks: int = Field(default=64, ge=1)
    """Held-out tasks per evaluation (the same tasks every time)."""


class ExperimentSpec(SpecModel):
    name: str
    """Experiment name: lowercase letters, digits and '-' (it labels Kubernetes objects)."""
    seed: int = 0
    """Seed of task sampling, rollouts and initialisation."""
    environment: EnvironmentConfig
    """Task suite and its settings (``kind`` selects the environment)."""
    policy: PolicyModelSpec
    """The initial policy model."""
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    """Policy inference."""
    estimator: EstimatorSpec = Field(default_factory=TetherSpec)
    """Advantage estimator (``name`` selects it)."""
    critic: CriticSpec | None = None
    """The critic; required by critic estimators (value, gae, tether, evpo, lvrl), optional otherwise."""
    policy_trainer: PolicyTrainerSpec = Field(default_factory=PolicyTrainerSpec)
    """Policy optimisation."""
    orchestrator: OrchestratorSpec = Field(default_factory=OrchestratorSpec)
    """The experiment loop."""
    placement: PlacementSpec = Field(default_factory=PlacementSpec)
    """Kubernetes node pools, tolerations and resources per component (ignored by local runs)."""

    @field_validator("estimator")
    @classmethod
    def _default_max_length(cls, estimator: Any, info: ValidationInfo) -> Any:
        """Fill the estimator's maximum response length from the rollout: sampling.max_tokens x
        the environment's turn limit (TETHER's bucket edges, GAE's ``auto`` lambdas)."""
        rollout, environment = info.data.get("rollout"), info.data.get("environment")
        if not estimator.needs_max_length() or rollout is None or environment is None:
            return estimator  # a missing rollout or environment reports its own error
        length = rollout.sampling.max_tokens * environment_turn_limit(environment)
        return estimator.model_copy(update={"max_length": length})

    @field_validator("critic", mode="before")
    @classmethod
    def _default_critic_kind(cls, value: Any) -> Any:
        return default_critic_kind(value)

    @model_validator(mode="after")
    def _check(self) -> ExperimentSpec:
        if not _NAME.match(self.name):
            raise ValueError(f"name {self.name!r} must be 1-50 lowercase letters, digits or '-'")
        estimator = self.estimator.build()
        if estimator.uses_critic and self.critic is None:
            raise ValueError(f"estimator {self.estimator.name!r} needs a critic: add a 'critic' section")
        needs_groups = self.estimator.name in ("rloo", "tether", "lvrl") or (
            self.critic is not None and self.critic.context == "loo_group"
        )
        if needs_groups and self.rollout.group_size < 2:
            raise ValueError("rollout.group_size must be >= 2 for leave-one-out baselines and contexts")
        distillation = self.policy_trainer.distillation
        if distillation is not None and distillation.gate == "value_decrease" and self.critic is None:
            raise ValueError("policy_trainer.distillation.gate 'value_decrease' needs a critic: add a 'critic' section")
        if self.critic is not None:
            admitted = critic_kind(self.critic).estimators
            if admitted is not None and self.estimator.name not in admitted:
                raise ValueError(
                    f"a {self.critic.kind} critic cannot feed estimator {self.estimator.name!r}; use one of {sorted(admitted)}"
                )
        if isinstance(self.critic, TrainedCriticSpec):  # a critic that is never trained reads no batches
            critic_batch = self.critic_batch_size
            if critic_batch > self.critic.replay.capacity:
                # The value trainer could never fill a batch: warmup would wait forever.
                raise ValueError(
                    f"critic batch ({critic_batch} trajectories) exceeds critic.replay.capacity "
                    f"({self.critic.replay.capacity}); raise the capacity or set critic.batch_size"
                )
        return self

    @property
    def batch_size(self) -> int:
        return self.rollout.tasks_per_step * self.rollout.group_size

    @property
    def critic_batch_size(self) -> int:
        """Trajectories per critic update: the critic's ``batch_size``, else the policy batch size."""
        if isinstance(self.critic, TrainedCriticSpec) and self.critic.batch_size is not None:
            return self.critic.batch_size
        return self.batch_size


def _format(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"] if not isinstance(part, int) or True)
        if item["type"] == "extra_forbidden":
            lines.append(f"{location}: unknown field")
        else:
            lines.append(f"{location or 'spec'}: {item['msg']}")
    return "invalid experiment spec:\n  " + "\n  ".join(lines)


def parse_spec(data: Any) -> ExperimentSpec:
    """Validate a spec mapping; raises :class:`SpecError` naming every bad field."""
    if not isinstance(data, dict):
        raise SpecError(f"an experiment spec must be a mapping, got {type(data).__name__}")
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as error:
        raise SpecError(_format(error)) from None


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read a YAML (or JSON) spec file and validate it."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"cannot read spec {path}: {error}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise SpecError(f"spec {path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from None
    return parse_spec(data)
