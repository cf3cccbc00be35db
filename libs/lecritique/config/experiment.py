"""The experiment spec: one typed document for local runs (YAML) and the REST API (JSON).

Every section forbids unknown fields, so a typo fails before any process starts, with an error
that names the field's full path (e.g. ``critic.replay.capcity``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from lecritique.config.base import SpecModel
from lecritique.config.documents import SpecError as SpecError  # re-exported: where callers import it
from lecritique.config.documents import read_document, validation_message
from lecritique.config.estimators import EstimatorSpec, TetherSpec
from lecritique.config.findings import errors
from lecritique.config.placement import PlacementSpec
from lecritique.config.probe import CriticProbeSpec
from lecritique.critics.specs import CriticSpec, TrainedCriticSpec, default_critic_kind
from lecritique.engines.config import EngineConfig, HFEngineConfig
from lecritique.envs import EnvironmentConfig, environment_turn_limit
from lecritique.models.templates import PlainTemplateConfig, TemplateConfig
from lecritique.tracking.config import TrackerConfig
from lecritique.training.config import PolicyTrainerConfig, TrainerProcessesConfig

_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?")
"""An experiment name (matched whole with ``fullmatch``: no trailing newline slips through)."""
_TINY_TASK = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
MAX_INT = 10**12
"""No integer anywhere in a spec is larger (in magnitude): bounds fields in every config module at once."""
MAX_PATH_CHARS = 4096


class SpecValueError(ValueError):
    """A value refused by :func:`check_values`; ``field`` is its dotted path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_model_path(path: str) -> str:
    """A model directory: no ``..`` component, no control characters, not too long.

    Where a path may point is the server's decision (a tenant's allowed model roots,
    :mod:`lecritique.tenancy.policy`); this only refuses what is never a sane model path.
    """
    if not path or len(path) > MAX_PATH_CHARS:
        raise ValueError(f"a model path must be 1-{MAX_PATH_CHARS} characters")
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        raise ValueError("a model path must not contain control characters")
    if ".." in path.replace("\\", "/").split("/"):
        raise ValueError("a model path must not contain '..' components")
    return path


def check_values(value: Any, where: str = "") -> None:
    """Every float finite, every integer within ±MAX_INT and every ``model_path`` clean (see
    :func:`check_model_path`), anywhere in the submitted data.

    Runs on the raw input, so it covers config classes of every module the spec includes.
    """
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        current, path = stack.pop()
        if isinstance(current, dict):
            stack.extend((item, f"{path}.{key}" if path else str(key)) for key, item in current.items())
        elif isinstance(current, list | tuple):
            stack.extend((item, f"{path}.{index}") for index, item in enumerate(current))
        elif isinstance(current, float) and not math.isfinite(current):
            raise SpecValueError(path or "spec", f"numbers must be finite, got {current}")
        elif isinstance(current, int) and not isinstance(current, bool) and abs(current) > MAX_INT:
            raise SpecValueError(path or "spec", f"integers must be at most {MAX_INT:.0e} in magnitude")
        elif isinstance(current, str) and path.rsplit(".", 1)[-1] == "model_path":
            try:
                check_model_path(current)
            except ValueError as error:
                raise SpecValueError(path, str(error)) from None


class PolicyModelSpec(SpecModel):
    path: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "model_path"})
    """Hugging Face model directory of the initial policy."""
    tiny: str | None = None
    """Or: a tiny CPU model built (and cached) by ``lecritique models build-tiny --task`` this name."""
    template: TemplateConfig = Field(default_factory=PlainTemplateConfig)
    """How prompts and turns are rendered: ``plain`` concatenation or the tokenizer's ``chat`` template."""

    @field_validator("path")
    @classmethod
    def _clean_path(cls, value: str | None) -> str | None:
        return None if value is None else check_model_path(value)

    @field_validator("tiny")
    @classmethod
    def _task_name(cls, value: str | None) -> str | None:
        if value is not None and not _TINY_TASK.fullmatch(value):
            raise ValueError("tiny must be a task name: 1-64 of a-z 0-9 _ - (e.g. 'sudoku-mini')")
        return value

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
    max_tokens: int = Field(default=32, ge=1, le=32_768)
    """Most tokens of one policy turn."""


class RolloutSpec(SpecModel):
    engine: EngineConfig = Field(default_factory=lambda: HFEngineConfig(kind="hf"))
    """Inference backend (``hf`` or ``vllm``); its model path is filled in at launch."""
    replicas: int = Field(default=1, ge=1, le=1024)
    """Rollout service replicas; the orchestrator spreads requests across them."""
    group_size: int = Field(default=4, ge=1, le=1024)
    """K: episodes sampled per task."""
    tasks_per_step: int = Field(default=32, ge=1, le=65_536)
    """Tasks per policy batch (batch size = tasks_per_step x group_size)."""
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    """Sampling parameters of policy turns."""


class PolicyTrainerSpec(PolicyTrainerConfig, TrainerProcessesConfig):
    """Policy optimisation (loss, AdamW) and its process layout (:class:`TrainerProcessesConfig`)."""


class OrchestratorSpec(SpecModel):
    steps: int = Field(default=100, ge=1, le=10_000_000)
    """Policy updates to run."""
    max_off_policy_steps: int = Field(default=8, ge=0, le=1_000_000)
    """Drop rollouts generated more than this many policy versions ago (Table 1: 8)."""
    prefetch_batches: int = Field(default=1, ge=0, le=64)
    """Batches queued ahead of the policy loop; at most ``prefetch_batches + 1`` are in flight
    (rolling out, evaluating or queued). 0: strictly on-policy, no overlap."""
    eval_every: int | None = Field(default=None, ge=1, le=10_000_000)
    """Greedy success (reward >= 1) on held-out eval-split tasks every this many steps, after the
    step's weights are loaded, once before the first step (the metrics row of step 0) and after the
    last one (its steps done or ``max_seconds`` spent); those two are outside ``max_seconds`` (None:
    never); ``eval_success`` in the metrics."""
    eval_tasks: int = Field(default=64, ge=1, le=100_000)
    """Held-out tasks per evaluation (the same tasks every time)."""
    max_degraded_steps: int = Field(default=50, ge=0, le=1_000_000)
    """Most consecutive policy steps taken without the critic (value plane down: LOO baseline) before the run stops."""
    rpc_deadline_seconds: float = Field(default=600.0, gt=0.0, le=86_400.0)
    """Deadline of every RPC the orchestrator makes; a call past it (a hung service) counts as the service being down."""
    service_down_seconds: float = Field(default=300.0, ge=0.0, le=86_400.0)
    """How long calls keep retrying a service that is down (restarting) before the run fails; the critic is never waited on."""
    max_seconds: float | None = Field(default=None, gt=0.0, le=31_536_000.0)
    """Wall-time budget: the run ends after the policy step during which its wall time (``seconds``
    in the metrics: from the orchestrator's start, the critic's warm-up included, summed over
    restarts) reached this, even short of ``steps`` (None: ``steps`` alone decide). Arms given the
    same budget are compared at equal wall time; a run ended by it is finished, not resumed."""


class ExperimentSpec(SpecModel):
    name: str
    """Experiment name: lowercase letters, digits and '-' (it labels Kubernetes objects)."""
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
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
    """The critic; required by estimators that use one (``uses_critic``: value, gae, tether, evpo, lvrl), optional otherwise."""
    policy_trainer: PolicyTrainerSpec = Field(default_factory=PolicyTrainerSpec)
    """Policy optimisation."""
    orchestrator: OrchestratorSpec = Field(default_factory=OrchestratorSpec)
    """The experiment loop."""
    placement: PlacementSpec = Field(default_factory=PlacementSpec)
    """Kubernetes node pools, tolerations and resources per component (ignored by local runs)."""
    tracking: list[TrackerConfig] = Field(default_factory=list)
    """Experiment trackers (tensorboard, wandb, mlflow, trackio) sent every step's metrics and the final report."""
    critic_probe: CriticProbeSpec | None = None
    """The critic's EV against the Monte-Carlo ceiling on held-out states during the run (None: off)."""

    @model_validator(mode="before")
    @classmethod
    def _finite_bounded_numbers(cls, data: Any) -> Any:
        check_values(data)
        return data

    @field_validator("estimator")
    @classmethod
    def _default_max_length(cls, estimator: Any, info: ValidationInfo) -> Any:
        """Fill the estimator's maximum response length from the rollout: sampling.max_tokens x
        the environment's turn limit (TETHER's bucket edges, GAE's ``auto`` lambdas)."""
        rollout, environment = info.data.get("rollout"), info.data.get("environment")
        if not estimator.needs_max_length() or rollout is None or environment is None:
            return estimator  # a missing rollout or environment reports its own error
        return estimator.model_copy(update={"max_length": response_budget(rollout, environment)})

    @field_validator("critic", mode="before")
    @classmethod
    def _default_critic_kind(cls, value: Any) -> Any:
        return default_critic_kind(value)

    @field_validator("critic")
    @classmethod
    def _default_segment_budget(cls, critic: Any, info: ValidationInfo) -> Any:
        """Fill a segmenting critic's response budget (``segments.max_length``) from the rollout, so
        its ``max_segments`` states spread over the budget, decided from the prefix."""
        rollout, environment = info.data.get("rollout"), info.data.get("environment")
        segments = getattr(critic, "segments", None)
        if segments is None or segments.max_length is not None or rollout is None or environment is None:
            return critic
        budget = response_budget(rollout, environment)
        return critic.model_copy(update={"segments": segments.model_copy(update={"max_length": budget})})

    @field_validator("name")
    @classmethod
    def _dns_name(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(
                "name must be 1-50 lowercase letters, digits or '-' (starting and ending alphanumeric)"
            )
        return name

    @model_validator(mode="after")
    def _check(self) -> ExperimentSpec:
        self.estimator.build()  # options the estimator refuses (e.g. buckets > 1 without max_length)
        refused = errors(self)  # every refusal of a spec whose fields validated (config/findings.py)
        if refused:
            raise ValueError("; ".join(finding.text for finding in refused))
        return self

    @property
    def response_budget(self) -> int:
        """The maximum response length in policy tokens: sampling.max_tokens x the environment's
        turn limit (TETHER's bucket edges, GAE's ``auto`` lambdas, per-bucket explained variance)."""
        return response_budget(self.rollout, self.environment)

    @property
    def batch_size(self) -> int:
        return self.rollout.tasks_per_step * self.rollout.group_size

    @property
    def critic_batch_size(self) -> int:
        """Trajectories per critic update: the critic's ``batch_size``, else the policy batch size."""
        if isinstance(self.critic, TrainedCriticSpec) and self.critic.batch_size is not None:
            return self.critic.batch_size
        return self.batch_size


def response_budget(rollout: RolloutSpec, environment: EnvironmentConfig) -> int:
    """sampling.max_tokens x the environment's turn limit: the most policy tokens of one episode."""
    return rollout.sampling.max_tokens * environment_turn_limit(environment)


def parse_spec(data: Any, spec_dir: Path | None = None) -> ExperimentSpec:
    """Validate a spec mapping; raises :class:`SpecError` naming every bad field.

    ``spec_dir``: the folder relative paths in the spec start from (a dataset file).
    """
    if not isinstance(data, dict):
        raise SpecError(f"an experiment spec must be a mapping, got {type(data).__name__}")
    try:
        return ExperimentSpec.model_validate(
            data, context={"spec_dir": spec_dir} if spec_dir is not None else None
        )
    except ValidationError as error:
        raise SpecError(validation_message(error, ExperimentSpec)) from None


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentSpec:
    """Read a YAML (or JSON) spec file, apply ``--set``-style overrides (``a.b=value``,
    :mod:`lecritique.config.overrides`) and validate it."""
    path = Path(path)
    data = read_document(path, "spec")
    if overrides:
        from lecritique.config.overrides import OverrideError, apply_overrides

        if not isinstance(data, dict):
            raise SpecError(f"spec {path} must be a mapping to take --set overrides")
        try:
            data = apply_overrides(data, overrides, ExperimentSpec)
        except OverrideError as error:
            raise SpecError(str(error)) from None
    return parse_spec(data, spec_dir=path.resolve().parent)
