"""Settings of the text critics: generative (GenAC) and frozen LLM (LVRL).

The experiment spec (:mod:`lecritique.config.experiment`) adds the serving fields every critic
kind shares (context, replay, replicas) to these and selects one by ``kind``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lecritique.critics.icc import INITIAL_REWARD_AVERAGE, REWARD_AVERAGE_DECAY
from lecritique.critics.segments import SegmentRule
from lecritique.critics.types import PEER_SUMMARY_CHARS
from lecritique.engines.config import EngineConfig, HFEngineConfig
from lecritique.models.dtypes import DType
from lecritique.training.config import CRITIC_LR, OptimizerConfig

GENERATIVE_PROMPT = (
    "{context}actor: {actor}, avg reward {reward_average:.2f}\n"
    "task: {prompt}\n"
    "so far: {prefix}\n"
    "infer the actor's ability from its response so far; chance it succeeds, 0-10? {instruction}"
)
"""Default generative-critic prompt (compact: tiny models have short contexts).

In-Context Conditioning (GenAC §5.1): part (a), the instruction to infer the actor's ability from
its partial response, and part (b), the actor's size and smoothed average reward.
Placeholders: ``{context}`` privileged context (may be empty), ``{actor}`` and
``{reward_average}`` (In-Context Conditioning), ``{prompt}`` the task prompt, ``{prefix}`` the
trajectory so far, ``{instruction}`` the scoring instruction (reasoning or direct)."""

FROZEN_SYSTEM_PROMPT = (
    "You estimate state values for a reinforcement-learning policy: the probability that this policy, "
    "continuing from a given point of its attempt, eventually succeeds. Use the other attempts of the "
    "same policy on the same task to judge what it is capable of."
)
"""Default system message of the frozen LLM critic (LVRL)."""


DEFAULT_MAX_SEGMENTS = 16
"""States per trajectory of the ``sentence`` and ``line`` rules when ``max_segments`` is unset."""


class SpecBase(BaseModel):
    """Base of the critic settings: unknown fields are errors, attribute docstrings document fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)


class SegmentsConfig(SpecBase):
    """How responses are cut into segments (the critic scores the state before each)."""

    rule: SegmentRule = "sentence"
    """``sentence``, ``line`` or ``turn`` boundaries (see :mod:`lecritique.critics.segments`)."""
    max_segments: int | None = Field(default=None, ge=1, le=4096)
    """Most states scored per trajectory; beyond it neighbouring segments merge (cost bound).
    Unset: none for ``turn`` (each turn is a state; the environment's turn limit bounds them, and
    BabyAI's 100 turns merged into 16 states would give 6 actions one value), 16 otherwise."""
    max_length: int | None = Field(default=None, ge=1)
    """The most policy tokens of an episode, over which ``max_segments`` states are spread (a
    start at least max_length / max_segments policy tokens after the last one), decided from the
    prefix (see :func:`lecritique.critics.segments.segment_starts`). An experiment spec fills it
    in: sampling.max_tokens x the environment's turn limit. None: the first ``max_segments``
    starts are kept."""

    @model_validator(mode="before")
    @classmethod
    def _default_cap(cls, data: object) -> object:
        if isinstance(data, dict) and "max_segments" not in data and data.get("rule", "sentence") != "turn":
            return {**data, "max_segments": DEFAULT_MAX_SEGMENTS}
        return data


class GenerativeCriticConfig(SpecBase):
    """A critic that keeps its LM head, reasons, then states an integer score 0-10 (GenAC §5)."""

    model_path: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "model_path"})
    """Causal-LM directory of the critic's initial weights (None: the initial policy's, LM head kept)."""
    engine: EngineConfig = Field(default_factory=lambda: HFEngineConfig(kind="hf"))
    """Inference backend the value evaluator generates with (``hf`` or ``vllm``); model path set per version."""
    segments: SegmentsConfig = Field(default_factory=SegmentsConfig)
    """Segment-level MDP: where the critic scores states."""
    reasoning: bool = True
    """Reason in text before the score; False: the prompt ends with the score tag (direct scoring)."""
    max_tokens: int = Field(default=64, ge=1, le=32_768)
    """Token budget of one critic completion (reasoning plus score)."""
    temperature: float = Field(default=1.0, ge=0.0)
    """Sampling temperature of critic completions (0: greedy), at evaluation and in REINFORCE."""
    eval_samples: int = Field(default=1, ge=1, le=1024)
    """Completions per state at evaluation; the value is the mean of the parsed scores."""
    score_tag: str = "score:"
    """Text that introduces the score, e.g. ``score:7``."""
    prompt_template: str = GENERATIVE_PROMPT
    """Critic prompt; placeholders {context} {actor} {reward_average} {prompt} {prefix} {instruction}."""
    actor_description: str | None = None
    """In-Context Conditioning: how the actor is described (None: its size and architecture)."""
    reward_average_decay: float = Field(default=REWARD_AVERAGE_DECAY, ge=0.0, lt=1.0)
    """In-Context Conditioning: decay of the running average of the actor's batch mean reward."""
    initial_reward_average: float = Field(default=INITIAL_REWARD_AVERAGE, ge=0.0, le=1.0)
    """In-Context Conditioning: the reward average shown before the first batch has finished."""
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(lr=CRITIC_LR))
    """AdamW settings of the REINFORCE updates (the critic's learning rate by default)."""
    samples_per_state: int = Field(default=1, ge=1, le=1024)
    """REINFORCE: critic completions sampled per state in each update."""
    baseline: Literal["none", "batch_mean", "state_mean"] = "batch_mean"
    """REINFORCE baseline: none, the update's mean reward, or the mean over the state's samples."""
    max_train_states: int | None = Field(default=64, ge=1)
    """States per REINFORCE update, sampled from the replay batch (None: all of them)."""
    micro_batch_tokens: int = Field(default=8192, ge=1)
    """Tokens per forward/backward of the critic update, padding included; rows are packed
    (``policy_trainer.packing``'s default), so a row longer than this is refused."""
    dtype: DType = "float32"
    """Parameter dtype of the trained critic."""
    device: str | None = None
    """Device to train on; None picks this rank's GPU if there is one, else the CPU."""

    @field_validator("prompt_template")
    @classmethod
    def _known_placeholders(cls, template: str) -> str:
        try:
            template.format(context="", actor="", reward_average=0.0, prompt="", prefix="", instruction="")
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"prompt_template has an unknown or malformed placeholder: {error}") from None
        return template


class LocalLLMConfig(SpecBase):
    """A frozen model served in the value evaluator on a rollout engine."""

    kind: Literal["local"] = "local"
    """Discriminator."""
    model_path: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "model_path"})
    """Causal-LM directory (None: a frozen copy of the initial policy)."""
    engine: EngineConfig = Field(default_factory=lambda: HFEngineConfig(kind="hf"))
    """Inference backend (``hf`` or ``vllm``); its model path is set from ``model_path``."""


class OpenAIEndpointConfig(SpecBase):
    """Any OpenAI-compatible chat-completions endpoint (hosted API, vLLM's server, lecritique rollout)."""

    kind: Literal["openai"] = "openai"
    """Discriminator."""
    base_url: str = Field(json_schema_extra={"x-tenant-rule": "llm_endpoint"})
    """Base URL up to ``/v1``, e.g. ``https://api.openai.com/v1`` or ``http://llm:8000/v1``."""
    model: str
    """Model name sent with every request."""
    api_key_env: str | None = Field(default="OPENAI_API_KEY", json_schema_extra={"x-tenant-rule": "env_name"})
    """Environment variable holding the API key; None: no key."""
    api_key_secret: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "secret_name"})
    """Kubernetes Secret the kubernetes launcher mounts as ``api_key_env`` in the value evaluator
    (None: the pod's environment provides it, e.g. the chart's ``valueEvaluator.env``)."""
    api_key_secret_key: str = "api-key"
    """Key of the API key inside ``api_key_secret``."""
    timeout_seconds: float = Field(default=120.0, gt=0.0, le=3600.0)
    """Timeout of one HTTP request."""
    max_retries: int = Field(default=4, ge=0, le=20)
    """Retries of a request that timed out, failed to connect, or got 408/409/429/5xx."""
    backoff_seconds: float = Field(default=1.0, ge=0.0)
    """First retry delay; doubles per retry (a Retry-After header takes precedence)."""
    max_backoff_seconds: float = Field(default=30.0, ge=0.0, le=3600.0)
    """Longest delay between retries."""
    concurrency: int = Field(default=8, ge=1, le=1024)
    """Requests in flight at once, per value-evaluator replica."""
    prompt_price_per_million: float = Field(default=0.0, ge=0.0)
    """USD per million prompt tokens, for the cost counter (0: count tokens only)."""
    completion_price_per_million: float = Field(default=0.0, ge=0.0)
    """USD per million completion tokens, for the cost counter."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {url!r}")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _secret_needs_a_variable(self) -> OpenAIEndpointConfig:
        if self.api_key_secret is not None and self.api_key_env is None:
            raise ValueError("api_key_secret needs api_key_env: the variable the key is mounted as")
        return self


LLMBackendConfig = Annotated[LocalLLMConfig | OpenAIEndpointConfig, Field(discriminator="kind")]
"""Where the frozen LLM runs: ``local`` engine or an ``openai``-compatible endpoint."""


class FrozenLLMConfig(SpecBase):
    """A frozen LLM that scores every state of a trajectory given its group's outcomes (LVRL)."""

    llm: LLMBackendConfig = Field(default_factory=LocalLLMConfig)
    """The LLM: a local engine or an OpenAI-compatible endpoint."""
    segments: SegmentsConfig = Field(default_factory=lambda: SegmentsConfig(rule="turn"))
    """States scored per trajectory (LVRL: one per action, i.e. per turn)."""
    max_tokens: int = Field(default=256, ge=1, le=32_768)
    """Token budget of one answer (one answer scores all states of one trajectory)."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature of the LLM (0: greedy)."""
    max_peers: int = Field(default=8, ge=0, le=1024)
    """Peer trajectories summarised in the group context."""
    max_peer_chars: int = Field(default=PEER_SUMMARY_CHARS, ge=1)
    """Characters of one peer summary."""
    max_segment_chars: int = Field(default=400, ge=1)
    """Characters of one segment of the scored trajectory in the prompt."""
    system_prompt: str = FROZEN_SYSTEM_PROMPT
    """System message of every query."""
    hindsight: bool = True
    """True: one query per trajectory scores every state seeing the whole trajectory (LVRL's
    hindsight values; admissible only for the ``lvrl`` estimator). False: one query per state,
    showing only the prefix before it (admissible for every estimator, Le Critique eq. 5)."""
