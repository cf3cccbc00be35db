"""The critic kinds, as one table: everything that differs between kinds is declared here.

Each :class:`CriticKind` names its spec class (the experiment spec's ``critic`` section), its
value-evaluator backend, its trainer (None: never trained), whether its values read the future
(hindsight) and what its pods need. Which estimators a kind admits follows from that and the
estimator's own declaration (:meth:`CriticKind.refusal`): no estimator is named here. Everything else asks :func:`critic_kind`; no other module compares kind names.
Backends and trainers import torch, so they are named by functions that import them on use:
this module stays light enough for the spec and the launchers.

A new kind: its settings and spec class (``specs.py``), its backend (and trainer), one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from lecritique.critics.config import OpenAIEndpointConfig
from lecritique.critics.specs import (
    CriticServingSpec,
    CriticSpec,
    DiscriminativeCriticSpec,
    FrozenLLMCriticSpec,
    GenerativeCriticSpec,
    TrainedCriticSpec,
)
from lecritique.critics.types import CriticBackend
from lecritique.trajectory import Trajectory

if TYPE_CHECKING:
    from lecritique.advantages import AdvantageEstimator
    from lecritique.training.critic_trainer import CriticTrainer

S = TypeVar("S", bound=CriticServingSpec)


@dataclass(frozen=True)
class ServingContext:
    """Where a backend serves: the policy it reads trajectories with, the version, the experiment."""

    policy_dir: Path
    """The policy directory (its tokenizer decodes trajectories for text critics)."""
    version: int = 0
    """The critic version being loaded (0 for a kind without versions)."""
    experiment: str = ""
    """Experiment id (metric labels of LLM clients)."""


@dataclass(frozen=True)
class SecretEnv:
    """An environment variable a pod reads from a Kubernetes Secret."""

    variable: str
    secret: str
    key: str


@dataclass(frozen=True)
class PodNeeds:
    """What a kind's pods need beyond the chart's defaults."""

    evaluator_secrets: tuple[SecretEnv, ...] = ()
    """Secrets mounted as environment variables in the value evaluator (e.g. an LLM API key)."""


class CriticLearner(Protocol):
    """What the value trainer drives: one update per replay batch, saves for publishing."""

    def train_step(self, trajectories: Sequence[Trajectory], targets: Any = None) -> dict[str, float]: ...

    def save(self, directory: Path) -> Path | None: ...


@dataclass(frozen=True)
class TrainerFactory(Generic[S]):
    """How the value trainer makes a kind's learner."""

    fresh: Callable[[S, Path, int], CriticLearner]
    """``(critic, policy_dir, seed)``: a new critic initialised from the policy."""
    resume: Callable[[S, Path, Callable[[], Path], int], CriticLearner]
    """``(critic, version_dir, policy_dir, seed)``: continue from a published version."""
    loss: Callable[[S], str]
    """The loss the learner minimises (reported by the value trainer's Info)."""


@dataclass(frozen=True)
class CriticKind(Generic[S]):
    name: str
    spec: type[S]
    """The ``critic`` section of this kind."""
    backend: Callable[[S, Path | None, ServingContext], CriticBackend]
    """The value-evaluator backend of a published version's directory (None: a kind without versions)."""
    trainer: TrainerFactory[S] | None
    """None: never trained (no replay consumed, no warmup, served as version 0)."""
    untrained_weights: Callable[[S, Path, Path], Path] | None = None
    """``(critic, policy_dir, scratch)``: weights of the untrained critic, for ``critic-eval``."""
    pod_needs: Callable[[S], PodNeeds] = field(default=lambda critic: PodNeeds())
    hindsight: Callable[[S], bool] = field(default=lambda critic: False)
    """Whether this critic's V(h_t) reads the trajectory after t (LVRL's hindsight values). A kind
    whose values are prefix-only only by a setting says so here; segment starts are prefix-only
    for every kind (:mod:`lecritique.critics.segments`)."""
    hindsight_field: str = "critic"
    """The spec field that makes it a hindsight critic (named in the refusal)."""
    prefix_only: Callable[[S], S] = field(default=lambda critic: critic)
    """The same critic scoring every state from the prefix before it (``critic-eval``'s default)."""

    def refusal(self, critic: S, estimator: type[AdvantageEstimator]) -> str | None:
        """Why ``critic`` cannot feed ``estimator`` (None: it can): a hindsight critic for an
        estimator that needs prefix-only values (``AdvantageEstimator.needs_prefix_values``)."""
        if not (estimator.needs_prefix_values() and self.hindsight(critic)):
            return None
        from lecritique.advantages import estimator_classes

        admitting = [cls.name for cls in estimator_classes() if cls.admits_hindsight]
        return (
            f"{self.hindsight_field}: this {self.name} critic scores every state seeing the whole trajectory, so "
            f"V(h_t) depends on later actions; estimator.name {estimator.name!r} uses V(h_t) as a baseline, which "
            "must depend on the prefix only (admissibility, Le Critique eq. 5). Score states from the prefix "
            f"only, or use an estimator that admits hindsight values: {', '.join(admitting)}"
        )

    @property
    def trained(self) -> bool:
        """Whether the kind has published versions and a value trainer."""
        return issubclass(self.spec, TrainedCriticSpec)


def _discriminative_backend(
    critic: DiscriminativeCriticSpec, weights: Path | None, where: ServingContext
) -> CriticBackend:
    from lecritique.critics.discriminative import DiscriminativeCritic

    if weights is None:
        raise ValueError("a discriminative critic needs a published critic version")
    return DiscriminativeCritic(weights, critic)


def _discriminative_fresh(critic: DiscriminativeCriticSpec, policy_dir: Path, seed: int) -> CriticLearner:
    return starting_critic(critic, Path(policy_dir), seed)


def starting_critic(critic: DiscriminativeCriticSpec, policy_dir: Path, seed: int) -> CriticTrainer:
    """The critic a run of this spec starts from: ``critic.model_path``, else the policy's backbone
    with a fresh head, or a critic of its own shape (``critic.tiny``) from the policy or fresh
    (``critic.init``). The value trainer, ``critic pretrain`` and ``critic sweep`` all start here,
    so an offline measurement of a setting is of the critic a run would train."""
    from lecritique.training.critic_trainer import CriticTrainer

    if critic.model_path is not None:  # a critic of an earlier run, a pretrained one (§7.1), or another LM
        return CriticTrainer.from_model_path(critic.model_path, policy_dir, critic)
    if critic.tiny is None and critic.init == "policy":
        return CriticTrainer.from_policy(policy_dir, critic)
    layers, hidden = (critic.tiny.layers, critic.tiny.hidden) if critic.tiny is not None else (None, None)
    return CriticTrainer.shaped(policy_dir, critic, layers=layers, hidden=hidden, init=critic.init, seed=seed)


def _discriminative_resume(
    critic: DiscriminativeCriticSpec, version_dir: Path, policy_dir: Callable[[], Path], seed: int
) -> CriticLearner:
    from lecritique.training.critic_trainer import CriticTrainer

    return CriticTrainer.load(version_dir, critic)


def _discriminative_untrained(critic: DiscriminativeCriticSpec, policy_dir: Path, scratch: Path) -> Path:
    """The critic a run starts from: its ``model_path`` when that is a saved critic, else the critic
    the value trainer would build (a random head on a backbone, a shaped critic), saved (the
    critic-eval spec's seed makes it repeatable)."""
    from lecritique.models.critic import is_saved_critic

    if critic.model_path is not None and is_saved_critic(critic.model_path):
        return Path(critic.model_path)
    _discriminative_fresh(critic, policy_dir, 0).save(scratch)
    return scratch


def _generative_backend(
    critic: GenerativeCriticSpec, weights: Path | None, where: ServingContext
) -> CriticBackend:
    from lecritique.critics.generative import GenerativeCritic

    if weights is None:
        raise ValueError("a generative critic needs a published critic version")
    return GenerativeCritic(critic, weights, policy_dir=where.policy_dir, version=where.version)


def _generative_fresh(critic: GenerativeCriticSpec, policy_dir: Path, seed: int) -> CriticLearner:
    from lecritique.critics.generative_trainer import GenerativeCriticTrainer

    return GenerativeCriticTrainer.from_policy(policy_dir, critic, seed=seed)


def _generative_resume(
    critic: GenerativeCriticSpec, version_dir: Path, policy_dir: Callable[[], Path], seed: int
) -> CriticLearner:
    from lecritique.critics.generative_trainer import GenerativeCriticTrainer

    return GenerativeCriticTrainer.load(version_dir, critic, policy_dir=policy_dir(), seed=seed)


def _frozen_backend(
    critic: FrozenLLMCriticSpec, weights: Path | None, where: ServingContext
) -> CriticBackend:
    from lecritique.critics.frozen_llm import FrozenLLMCritic

    return FrozenLLMCritic(critic, policy_dir=where.policy_dir, experiment=where.experiment)


def _frozen_pod_needs(critic: FrozenLLMCriticSpec) -> PodNeeds:
    llm = critic.llm
    if not isinstance(llm, OpenAIEndpointConfig) or llm.api_key_secret is None or llm.api_key_env is None:
        return PodNeeds()
    return PodNeeds(
        evaluator_secrets=(SecretEnv(llm.api_key_env, llm.api_key_secret, llm.api_key_secret_key),)
    )


KINDS: dict[str, CriticKind[Any]] = {
    kind.name: kind
    for kind in (
        CriticKind(
            "discriminative",
            DiscriminativeCriticSpec,
            backend=_discriminative_backend,
            trainer=TrainerFactory(
                _discriminative_fresh, _discriminative_resume, loss=lambda critic: critic.loss
            ),
            untrained_weights=_discriminative_untrained,
        ),
        CriticKind(
            "generative",
            GenerativeCriticSpec,
            backend=_generative_backend,
            trainer=TrainerFactory(_generative_fresh, _generative_resume, loss=lambda critic: "reinforce"),
            # The untrained generative critic is its initial causal LM, as published at version 0.
            untrained_weights=lambda critic, policy_dir, scratch: Path(critic.model_path or policy_dir),
        ),
        CriticKind(
            "frozen_llm",
            FrozenLLMCriticSpec,
            backend=_frozen_backend,
            trainer=None,
            pod_needs=_frozen_pod_needs,
            hindsight=lambda critic: critic.hindsight,
            hindsight_field="critic.hindsight (true; set false: one query per state, prefix only)",
            prefix_only=lambda critic: critic.model_copy(update={"hindsight": False}),
        ),
    )
}
"""Every critic kind by name (the ``kind`` of a spec's critic section)."""


def critic_kind(critic: CriticSpec | CriticServingSpec) -> CriticKind[Any]:
    """The kind a critic spec belongs to."""
    for kind in KINDS.values():
        if isinstance(critic, kind.spec):
            return kind
    raise TypeError(f"{type(critic).__name__} is no critic kind's spec; kinds: {', '.join(KINDS)}")
