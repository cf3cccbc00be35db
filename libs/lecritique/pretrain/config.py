"""Settings of ``lecritique critic pretrain``: which policies play, how the critic is trained offline."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from lecritique.config.base import SpecModel
from lecritique.config.documents import SpecError, validation_message
from lecritique.config.experiment import ExperimentSpec
from lecritique.critics.specs import DiscriminativeCriticSpec


class PretrainConfig(SpecModel):
    """Value pretraining reused across runs (Le Critique §7.1): rollouts of diverse policies, the
    spec's critic trained on their returns to a held-out explained-variance plateau."""

    policies: list[str] = Field(default_factory=list)
    """More policies to play (earlier runs' ``RUN/weights/policy/NNNNNNNN``), with the spec policy's tokenizer."""
    include_spec_policy: bool = True
    """Whether the spec's own policy (its ``policy.path`` or tiny build) plays too."""
    tasks_per_policy: int = Field(default=256, ge=1, le=10_000_000)
    """Tasks each policy plays (``rollout.group_size`` episodes each), from the train split."""
    held_out_fraction: float = Field(default=0.2, gt=0.0, lt=1.0)
    """Share of tasks (whole groups, every policy's episodes of them) kept out of training."""
    max_epochs: int = Field(default=50, ge=1, le=1_000_000)
    """Passes over the training rollouts at most (a rerun with a larger cap continues)."""
    patience: int = Field(default=3, ge=1, le=1_000_000)
    """Epochs without a held-out EV gain of ``min_delta`` before training stops (the plateau)."""
    min_delta: float = Field(default=0.005, ge=0.0, le=1.0)
    """Held-out EV gain that counts as progress."""
    batch_size: int | None = Field(default=None, ge=1, le=10_000_000)
    """Trajectories per critic update (None: the spec's critic batch size, as in the live run)."""
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    """Seed of task sampling, rollouts, the split and the head (None: the spec's seed)."""

    @field_validator("policies")
    @classmethod
    def _existing_policies(cls, paths: list[str]) -> list[str]:
        for index, path in enumerate(paths):
            if not (Path(path) / "config.json").is_file():
                raise ValueError(f"policies.{index}: {path!r} is not a saved policy (no config.json in it)")
        return [str(Path(path).resolve()) for path in paths]


def parse_pretrain_config(values: dict[str, object]) -> PretrainConfig:
    """Validate the settings; :class:`SpecError` names every bad field."""
    try:
        return PretrainConfig.model_validate(values)
    except ValidationError as error:
        raise SpecError(validation_message(error, PretrainConfig, "pretrain settings")) from None


def pretrained_critic(spec: ExperimentSpec) -> DiscriminativeCriticSpec:
    """The spec's critic, if pretraining can train it: a discriminative critic (its head regresses
    the returns offline); other kinds are refused naming the field."""
    critic = spec.critic
    if critic is None:
        raise SpecError("critic: the spec has no critic section; pretraining trains the spec's critic")
    if not isinstance(critic, DiscriminativeCriticSpec):
        raise SpecError(
            f"critic.kind: {critic.kind!r} cannot be pretrained; value pretraining (Le Critique §7.1) trains "
            "a discriminative critic (critic.kind: discriminative) on Monte-Carlo returns"
        )
    return critic
