"""The ``critic`` section of an experiment spec: one model per critic kind, selected by ``kind``.

Every kind shares the serving fields (context, replicas, replay); trained kinds add their
update schedule. The table of kinds (:mod:`lecritique.critics.kinds`) names these classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from lecritique.critics.config import FrozenLLMConfig, GenerativeCriticConfig, SegmentsConfig, SpecBase
from lecritique.critics.icc import INITIAL_REWARD_AVERAGE, REWARD_AVERAGE_DECAY
from lecritique.critics.types import PEER_SUMMARY_CHARS, CriticContextKind
from lecritique.replay.config import ReplayBounds
from lecritique.training.config import CriticTrainerConfig, TrainerProcessesConfig

DEFAULT_KIND = "discriminative"
"""The kind of a critic section that names none."""


@dataclass(frozen=True)
class ActorConditioning:
    """In-Context Conditioning settings (GenAC §5.1): how the actor is described to the critic."""

    description: str | None = None
    """The actor's description (None: its size and architecture, from the policy's config)."""
    reward_average_decay: float = REWARD_AVERAGE_DECAY
    """Decay of the running average of the actor's batch mean reward."""
    initial_reward_average: float = INITIAL_REWARD_AVERAGE
    """The average shown before the first batch has finished."""


def _states(segments: SegmentsConfig, turns: int) -> tuple[int, str]:
    """States scored per trajectory: ``max_segments``, else (the ``turn`` rule) the turn limit."""
    if segments.max_segments is not None:
        return segments.max_segments, f"segments.max_segments {segments.max_segments}"
    return turns, f"{turns} turns"


@dataclass(frozen=True)
class Generation:
    """Tokens a critic generates in one policy step, with the arithmetic in the spec's field names."""

    what: str
    tokens: int


class CriticServingSpec(SpecBase):
    """What every critic kind shares: its context, its serving replicas, the replay it is fed."""

    context: CriticContextKind = "none"
    """Privileged context: none (VF), reference (answer / solved grid), loo_group (other responses + rewards)."""
    privileged_key: str | None = None
    """Which privileged field ``reference`` uses (None: the environment's first)."""
    max_context_chars: int | None = Field(default=None, ge=1, le=10_000_000)
    """Characters of the rendered privileged context (None: no character bound, the token bound
    applies). A group context over it shortens every sibling's response evenly."""
    sibling_chars: int | None = Field(default=None, ge=1, le=10_000_000)
    """Characters of one sibling's response in a group context; a longer one loses its middle,
    keeping its start and its final answer (None: whole responses, as in the CodeIO PVF)."""
    max_context_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    """Tokens of the privileged context (None: half the critic's context length, read from the
    model config of the tokenizer the context is encoded with; unbounded when unknown)."""
    evaluator_replicas: int = Field(default=1, ge=1, le=1024)
    """Value-evaluator service replicas."""
    replay: ReplayBounds = Field(default_factory=ReplayBounds)
    """Replay buffer bounds."""

    def actor_conditioning(self) -> ActorConditioning:
        """How the actor is described to this critic (kinds without settings get the defaults)."""
        return ActorConditioning()

    def peer_summary_chars(self) -> int:
        """Characters of one group peer's summary in this critic's queries."""
        return PEER_SUMMARY_CHARS

    def trainer_processes(self) -> tuple[int, int | None]:
        """torch.distributed processes of the value trainer in all, and per pod (None: the chart's node size)."""
        return 1, None

    def generation(self, batch: int, turns: int, updates: int) -> Generation | None:
        """The tokens this critic generates in one policy step at most (None: it generates none):
        ``batch`` trajectories a step, ``turns`` the environment's turn limit, ``updates`` the critic
        updates a step (what a tenant's ``maxTokensPerStep`` counts, :mod:`lecritique.tenancy.work`)."""
        return None


class TrainedCriticSpec(CriticServingSpec):
    """A critic with weights: trained from the replay stream, published as versions."""

    warmup_updates: int = Field(default=20, ge=0, le=1_000_000)
    """Critic updates before the critic's values are used (Appendix B.3: 20)."""
    warmup: Literal["auto", "blocking"] = "auto"
    """``auto``: an estimator that is its own critic-free baseline at its starting state (TETHER at
    rho = 0, EVPO; ``steps_while_critic_warms``) takes policy steps at once, critic-free, while the
    critic makes its ``warmup_updates`` on those steps' batches, and uses the critic from the first
    batch a warm version scores; the others (``value``, ``gae``) wait for the warm-up, playing
    batches of a stream of their own. ``blocking``: every estimator waits (Le Critique B.3's
    protocol: 20 value updates before RL starts)."""
    batch_size: int | None = Field(default=None, ge=1, le=10_000_000)
    """Trajectories per critic update (None: the policy batch size, as in Table 2)."""
    publish_every: int = Field(default=1, ge=1, le=1_000_000)
    """Publish critic weights every this many updates (large models: publishing costs a checkpoint)."""
    keep_versions: int = Field(default=8, ge=2, le=10_000)
    """Critic versions kept in the weight store (older ones are pruned)."""
    updates_per_step: int = Field(default=0, ge=0, le=1_000_000)
    """0: the critic trains asynchronously, as fast as its data allows (Le Critique B.1). k > 0:
    the batch of policy step t is scored by a critic version at least k updates newer than the one
    that scored step t-1; the orchestrator waits for it (value-plane wait). What the replay can feed
    bounds k (``docs/critics.md``, "Critic budget"): a k it can never meet is refused."""


class TinyCriticShape(SpecBase):
    """The critic's own depth and width, for a tiny (Llama) policy; unset fields keep the policy's."""

    layers: int | None = Field(default=None, ge=1, le=256)
    """Decoder layers (None: the policy's)."""
    hidden: int | None = Field(default=None, ge=8, le=65_536)
    """Width of the residual stream (None: the policy's); the MLP scales with it, the head count stays."""


class DiscriminativeCriticSpec(CriticTrainerConfig, TrainerProcessesConfig, TrainedCriticSpec):
    """The scalar-head critic (backbone copied from the policy, head random; Appendix B.3)."""

    kind: Literal["discriminative"] = "discriminative"
    """Critic kind served by the value evaluator."""
    model_path: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "model_path"})
    """A saved critic to start from (Le Critique §7.1, value pretraining reused across runs): a
    published critic version of an earlier run (``RUN/weights/critic/NNNNNNNN``) or a pretrained
    one, or any causal LM whose tokenizer is the policy's (its backbone, a fresh head). None: the
    policy's backbone with a fresh head (Appendix B.3)."""
    tiny: TinyCriticShape | None = None
    """The critic's own shape for a tiny (Llama) policy (None: the policy's shape); see ``init``."""
    init: Literal["policy", "fresh"] = "policy"
    """``policy``: start from the policy's weights (with ``tiny``, every tensor whose shape matches:
    the embeddings and the first layers; needs the policy's width); ``fresh``: random weights."""

    def trainer_processes(self) -> tuple[int, int | None]:
        return self.processes, self.processes_per_node

    @model_validator(mode="after")
    def _one_source_of_weights(self) -> DiscriminativeCriticSpec:
        if self.model_path is not None and self.tiny is not None:
            raise ValueError(
                "critic.tiny: a critic started from critic.model_path has that model's shape; set one of the two"
            )
        if self.model_path is not None and self.init == "fresh":
            raise ValueError(
                "critic.init: 'fresh' discards the weights of critic.model_path; drop one of the two"
            )
        return self


class GenerativeCriticSpec(GenerativeCriticConfig, TrainedCriticSpec):
    """GenAC's generative critic: reasons, states a score 0-10, trained by REINFORCE (GenAC §5)."""

    kind: Literal["generative"] = "generative"
    """Critic kind served by the value evaluator."""

    def generation(self, batch: int, turns: int, updates: int) -> Generation:
        """Scoring: every state of the batch, ``eval_samples`` completions each; REINFORCE: per update,
        ``max_train_states`` states (else every state of a critic batch), ``samples_per_state`` each."""
        states, said = _states(self.segments, turns)
        scoring = batch * states * self.eval_samples * self.max_tokens
        critic_batch = self.batch_size or batch
        trained = critic_batch * states
        if self.max_train_states is not None:
            trained = min(trained, self.max_train_states)
        training = updates * trained * self.samples_per_state * self.max_tokens
        what = (
            f"scoring {batch} trajectories x {said} x eval_samples {self.eval_samples} x max_tokens "
            f"{self.max_tokens} = {scoring}, plus REINFORCE {updates} updates x {trained} states x "
            f"samples_per_state {self.samples_per_state} x max_tokens {self.max_tokens} = {training}"
        )
        return Generation(what, scoring + training)

    def actor_conditioning(self) -> ActorConditioning:
        return ActorConditioning(
            self.actor_description, self.reward_average_decay, self.initial_reward_average
        )


class FrozenLLMCriticSpec(FrozenLLMConfig, CriticServingSpec):
    """LVRL's frozen LLM critic with group context; never trained, served as version 0."""

    kind: Literal["frozen_llm"] = "frozen_llm"
    """Critic kind served by the value evaluator."""

    def generation(self, batch: int, turns: int, updates: int) -> Generation:
        """One answer of ``max_tokens`` per trajectory (``hindsight``), else one per state."""
        if self.hindsight:
            return Generation(
                f"{batch} trajectories x max_tokens {self.max_tokens} (hindsight)", batch * self.max_tokens
            )
        states, said = _states(self.segments, turns)
        return Generation(
            f"{batch} trajectories x {said} x max_tokens {self.max_tokens}", batch * states * self.max_tokens
        )

    def peer_summary_chars(self) -> int:
        return self.max_peer_chars


CriticSpec = Annotated[
    DiscriminativeCriticSpec | GenerativeCriticSpec | FrozenLLMCriticSpec, Field(discriminator="kind")
]
"""The critic section: one of the kinds (:data:`lecritique.critics.kinds.KINDS` lists them)."""


def default_critic_kind(value: Any) -> Any:
    """A critic mapping without ``kind`` is the default kind; other kinds must be named."""
    if isinstance(value, dict) and "kind" not in value:
        return {**value, "kind": DEFAULT_KIND}
    return value
