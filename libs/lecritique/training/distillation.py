"""LVOPD: on-policy distillation gated by the estimated value (LVRL paper, Figure 1 step 4).

The student (the policy) samples; a teacher model supervises the student's own tokens with the
per-token reverse KL, KL(pi_student(.|h_t) || pi_teacher(.|h_t)) over the full vocabulary, added
to the policy loss. LVOPD applies this supervision only to the actions at which the estimated
value decreases, i.e. whose LVRL step advantage V(s_{j+1}) - V(s_j) (anchored: V(s_0) = the
group success rate, V(s_S) = the reward; :meth:`LVRLEstimator.step_advantages`) is below a
threshold. Gates:

- ``value_decrease``: LVOPD (needs the critic's values on the trajectories);
- ``trajectory_failure``: every action of a trajectory whose reward is below a threshold
  (the paper's trajectory-gated baseline);
- ``none``: every action (plain on-policy distillation).

The term is normalised by the global number of policy tokens, like the policy loss, so it adds
up the same way across micro-batches and data-parallel ranks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoModelForCausalLM, PreTrainedModel

from lecritique.advantages import AdvantageBatch, LVRLEstimator
from lecritique.models.dtypes import torch_dtype
from lecritique.training.collate import policy_length, row_columns
from lecritique.training.config import DistillationConfig
from lecritique.training.packing import Layout, padded_layout
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)


def lvopd_gates(trajectories: Sequence[Trajectory], config: DistillationConfig) -> list[np.ndarray]:
    """bool [T_i] per trajectory: the policy tokens that receive teacher supervision."""
    if not trajectories:
        return []
    if config.gate == "none":
        return [t.policy_mask.copy() for t in trajectories]
    if config.gate == "trajectory_failure":
        return [t.policy_mask & (t.reward < config.success_threshold) for t in trajectories]
    batch = AdvantageBatch.from_trajectories(trajectories, values_needed_by="the value_decrease gate")
    gates = []
    for row, (trajectory, step_changes) in enumerate(
        zip(trajectories, LVRLEstimator().step_advantages(batch), strict=True)
    ):
        positions = np.flatnonzero(batch.mask[row])
        gate = np.zeros(trajectory.token_ids.shape[0], dtype=bool)
        if positions.size:
            steps = np.unique(trajectory.step_ids[positions])
            decreasing = step_changes < config.value_threshold
            gate[positions] = decreasing[np.searchsorted(steps, trajectory.step_ids[positions])]
        gates.append(gate)
    return gates


def collate_gates(
    trajectories: Sequence[Trajectory], gates: Sequence[np.ndarray], layout: Layout | None = None
) -> torch.Tensor:
    """bool [B, L - 1] in :func:`~lecritique.training.collate.collate_policy`'s next-token layout
    (``layout``: the same rows and places as the policy batch's; None: every row, right-padded)."""
    if layout is None:
        layout = padded_layout(range(len(trajectories)), [policy_length(t) for t in trajectories])
    out = np.zeros((layout.num_lines, layout.width - 1), dtype=bool)
    for row in layout.rows:
        trajectory = trajectories[row]
        line, columns = row_columns(layout, row, trajectory)
        out[line, columns] = gates[row] & trajectory.policy_mask
    return torch.from_numpy(out)


def reverse_kl_per_token(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(student || teacher) over the vocabulary at every position: [B, L] from [B, L, V] logits."""
    student = torch.log_softmax(student_logits.float(), dim=-1)
    teacher = torch.log_softmax(teacher_logits.float(), dim=-1)
    return (student.exp() * (student - teacher)).sum(dim=-1)


class Distiller:
    """The teacher and the gated distillation term of one policy trainer."""

    def __init__(self, config: DistillationConfig, device: torch.device, vocab_size: int) -> None:
        self.config = config
        teacher: PreTrainedModel = AutoModelForCausalLM.from_pretrained(
            config.teacher, dtype=torch_dtype(config.teacher_dtype)
        )
        if int(teacher.config.vocab_size) != vocab_size:
            raise ValueError(
                f"distillation.teacher {config.teacher} has vocabulary size {teacher.config.vocab_size}, "
                f"the policy {vocab_size}: the teacher must share the policy's tokenizer"
            )
        nn.Module.to(teacher, device)
        teacher.train(False)
        teacher.requires_grad_(False)
        self.teacher = teacher
        logger.info("LVOPD: teacher %s, gate %s, coef %g", config.teacher, config.gate, config.coef)

    def loss(
        self,
        student_logits: torch.Tensor,
        inputs: Mapping[str, Any],
        gate: torch.Tensor,
        num_tokens: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``coef`` x the summed reverse KL on gated tokens / ``num_tokens``, and the sums
        [gated tokens, KL on them] for the metrics. ``inputs``: the student's forward arguments
        (packed or padded: the teacher reads the same rows in the same places); ``gate`` is
        [B, L - 1] (next-token layout)."""
        with torch.no_grad():
            teacher_logits = self.teacher(**inputs).logits
        kl = reverse_kl_per_token(student_logits[:, :-1], teacher_logits[:, :-1])
        gate = gate.to(kl.device)
        kl_sum = torch.where(gate, kl, torch.zeros_like(kl)).sum()
        sums = torch.stack([gate.sum().to(torch.float64), kl_sum.detach().to(torch.float64)])
        return self.config.coef * kl_sum / num_tokens, sums
