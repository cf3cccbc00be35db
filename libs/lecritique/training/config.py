"""Settings of the trainers (light: no torch, no transformers), as experiment specs embed them.

The trainers themselves (:mod:`~lecritique.training.policy_trainer`,
:mod:`~lecritique.training.critic_trainer`) import torch; specs only need these.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from lecritique.models.dtypes import DType
from lecritique.weights.config import SharedVolumeTransport, WeightTransportConfig

POLICY_LR = 1e-6
"""The policy's learning rate (Le Critique Table 1, the 4B policy): the default everywhere a policy trains."""
CRITIC_LR = 1e-5
"""The critic's learning rate (Le Critique Table 2): the default of every trained critic."""


class OptimizerConfig(BaseModel):
    """AdamW with global-norm gradient clipping (Le Critique Tables 1 and 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lr: float = Field(default=POLICY_LR, gt=0.0)
    """Learning rate (the paper: 1e-6 for the 4B policy, 1e-5 for the critic); constant."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    weight_decay: float = Field(default=0.01, ge=0.0)
    """AdamW decoupled weight decay."""
    eps: float = Field(default=1e-8, gt=0.0)
    """AdamW epsilon."""
    grad_clip: float = Field(default=1.0, gt=0.0)
    """Clip the global gradient norm to this value."""


class DPPOLossConfig(BaseModel):
    """PRIME-RL's default DPPO+KL loss, with Le Critique Table 1's settings as defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["dppo"] = "dppo"
    """Selects this loss."""
    mask_high: float = Field(default=0.2, ge=0.0)
    """Drop a token with A > 0 whose probability rose by more than this since the rollout."""
    mask_low: float = Field(default=0.2, ge=0.0)
    """Drop a token with A < 0 whose probability fell by more than this since the rollout."""
    kl_coef: float = Field(default=1e-3, ge=0.0)
    """Coefficient of the squared log-ratio penalty (logp - old_logp)^2 on every policy token."""


class PPOClipLossConfig(BaseModel):
    """The standard PPO clipped surrogate (Schulman et al., 2017), optionally with the penalty."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["ppo_clip"] = "ppo_clip"
    """Selects this loss."""
    clip_low: float = Field(default=0.2, gt=0.0, lt=1.0)
    """Lower clip range: the ratio is clipped at 1 - clip_low."""
    clip_high: float = Field(default=0.2, gt=0.0)
    """Upper clip range: the ratio is clipped at 1 + clip_high."""
    kl_coef: float = Field(default=0.0, ge=0.0)
    """Coefficient of the squared log-ratio penalty (0: plain PPO-clip)."""


PolicyLossConfig = Annotated[DPPOLossConfig | PPOClipLossConfig, Field(discriminator="kind")]
"""Which policy loss to use, selected by ``kind``."""


GateKind = Literal["value_decrease", "trajectory_failure", "none"]


class DistillationConfig(BaseModel):
    """On-policy distillation from a teacher as an extra policy-loss term (LVOPD)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    teacher: str = Field(json_schema_extra={"x-tenant-rule": "model_path"})
    """Causal-LM directory of the teacher; it must share the policy's tokenizer (same vocabulary)."""
    gate: GateKind = "value_decrease"
    """Which actions get teacher supervision: value_decrease (LVOPD), trajectory_failure, none."""
    coef: float = Field(default=1.0, ge=0.0)
    """Weight of the distillation term."""
    pg_coef: float = Field(default=1.0, ge=0.0)
    """Weight of the policy-gradient loss beside it (0: distillation only)."""
    value_threshold: float = 0.0
    """value_decrease: supervise actions whose value change is below this (0: any decrease)."""
    success_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """trajectory_failure: supervise every action of trajectories whose reward is below this."""
    teacher_dtype: DType = "float32"
    """Parameter dtype of the teacher."""


class DataParallelConfig(BaseModel):
    """How a trainer spreads over its torchrun ranks and at what precision it computes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    parallelism: Literal["ddp", "fsdp2"] = "ddp"
    """Data parallelism under torchrun: ``ddp`` (full replica per rank) or ``fsdp2`` (``fully_shard``: weights, gradients, AdamW state sharded)."""
    mixed_precision: Literal["auto", "bf16", "off"] = "auto"
    """bf16 compute with float32 master weights and gradient reduction; ``auto``: bf16 on GPUs that support it, off on CPU."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (less memory, one more forward)."""
    attention_backend: Literal["auto", "flash", "efficient", "math", "cudnn"] = "auto"
    """SDPA kernel: ``auto`` is flash then memory-efficient for bf16/fp16 on CUDA, memory-efficient then math for float32 on CUDA, math on CPU (never cuDNN, which rebuilt its graph per call on an H200); a name forces that one kernel."""
    deterministic: bool = False
    """Bit-reproducible steps on one machine: ``torch.use_deterministic_algorithms``, cuBLAS's fixed workspace, math attention (slower)."""


class TrainerProcessesConfig(BaseModel):
    """A trainer service's processes, checkpoints and weight transport: one model for the policy
    trainer (``policy_trainer``) and the discriminative critic's value trainer (``critic``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    processes: int = Field(default=1, ge=1, le=64)
    """torch.distributed processes of the trainer in all (one per GPU), over one or more pods;
    ``parallelism`` says how they share the model (``ddp`` or ``fsdp2``)."""
    processes_per_node: int | None = Field(default=None, ge=1, le=64)
    """Processes per pod (torchrun --nproc_per_node; one per GPU of a node); None: the chart's gpusPerNode, or all on one pod."""
    checkpoint_every: int | None = Field(default=1, ge=1, le=1_000_000)
    """Save weights, AdamW state, step and RNG (DCP, sharded under FSDP2) every this many updates,
    so a restarted trainer resumes its optimiser; None: never (a restart resumes the newest
    published weights with fresh AdamW moments)."""
    checkpoint_keep: int = Field(default=2, ge=1, le=1_000)
    """Checkpoints kept in the run's state directory (older ones are deleted)."""
    weight_transport: WeightTransportConfig = Field(default_factory=SharedVolumeTransport)
    publish_dtype: Literal["trained", "bfloat16", "float16"] = "trained"
    """Dtype of the floating-point weights published and broadcast: ``trained`` (the trainer's
    own), or the readers' serving dtype (``bfloat16`` for a bf16 rollout engine: half the bytes of
    float32, each tensor equal to the trainer's ``p.to(bfloat16)``)."""
    """How new versions reach their readers (rollout replicas, value evaluators): ``shared_volume`` or ``broadcast``."""


class PolicyTrainerConfig(DataParallelConfig):
    """Policy update settings. Defaults suit tiny CPU models; the paper's are in the docstrings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    loss: PolicyLossConfig = Field(default_factory=DPPOLossConfig)
    """Policy loss: ``dppo`` (the paper's PRIME-RL default) or ``ppo_clip``."""
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(lr=POLICY_LR))
    """AdamW settings; the paper uses lr 1e-6, betas (0.9, 0.999), weight decay 0.01, clip 1.0."""
    micro_batch_tokens: int = Field(default=8192, ge=1)
    """Tokens per forward/backward, padding included (lines x width); bounds activation memory.
    With ``packing`` a row longer than this is refused (a row is never split)."""
    packing: bool = True
    """Pack several rows end to end into each line of a micro-batch, position ids restarting per
    row and attention kept inside each row (exact: the same loss and gradient as padding, to
    float rounding; :mod:`lecritique.training.packing`); false: one right-padded row per line.
    A model whose attention cannot keep rows apart is padded whatever this says (logged)."""
    dtype: DType = "float32"
    """Parameter dtype of the trained model."""
    device: str | None = None
    """Device to train on; None picks this rank's GPU if there is one, else the CPU."""
    distillation: DistillationConfig | None = None
    """LVOPD: value-gated on-policy distillation from a teacher as an extra loss term (None: off)."""


class CriticTrainerConfig(DataParallelConfig):
    """Value-function training settings (defaults: Le Critique Table 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    loss: Literal["bce", "mse"] = "bce"
    """``bce`` for rewards in [0, 1] (value = sigmoid(head)), ``mse`` for any real return."""
    head_init: Literal["random", "mean_return"] = "random"
    """How a fresh critic's scalar head starts (a saved critic keeps its own). ``random``: the
    Hugging Face default (weights ~ N(0, initializer_range), bias 0: values start near 0.5 for
    ``bce``, near 0 for ``mse``, with per-state noise). ``mean_return``: weights 0 and the bias at
    the mean return of the first update's batch (its logit for ``bce``, clipped to [1e-3, 1 - 1e-3]),
    so the critic starts as the constant baseline that batch implies and its first updates move the
    head's weights rather than undo a random offset; until that update its value is the constant
    0.5 (``bce``) or 0 (``mse``). Measured against each other by ``lecritique critic sweep``
    (``docs/critics.md``)."""
    predict_batch_tokens: int = Field(default=32768, ge=1)
    """Tokens per forward of ``predict``, padding included (the value evaluator's path: no gradients, no activations kept, so larger than ``micro_batch_tokens``)."""
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(lr=CRITIC_LR))
    """AdamW settings; the paper uses lr 1e-5, betas (0.9, 0.999), weight decay 0.01."""
    micro_batch_tokens: int = Field(default=8192, ge=1)
    """Tokens per forward/backward, padding included (lines x width); bounds activation memory.
    With ``packing`` a row longer than this is refused (a row is never split)."""
    packing: bool = True
    """Pack several rows end to end into each line of a micro-batch, in training and in
    ``predict``: position ids restart per row and attention stays inside each row (exact: the same
    loss, gradient and values as padding, to float rounding; :mod:`lecritique.training.packing`);
    false: one right-padded row per line. A model whose attention cannot keep rows apart is padded
    whatever this says (logged)."""
    dtype: DType = "float32"
    """Parameter dtype of the trained critic."""
    device: str | None = None
    """Device to train on; None picks this rank's GPU if there is one, else the CPU."""
