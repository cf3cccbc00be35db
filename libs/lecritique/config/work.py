"""What one policy step of a validated spec generates and stores, for the tenant's quotas.

The facts the dumped spec does not hold (:class:`SpecWork`): the environment's prompt budget and
turn limit, the bytes of the longest trajectory a replay row holds (:mod:`lecritique.replay.memory`),
and what the critic generates in a step, which each critic kind declares on its spec class
(``generation``: a generative critic's scoring and REINFORCE samples, a frozen LLM's answers).
:mod:`lecritique.tenancy.work` adds the policy's, a probe's and the evaluation's tokens and holds
them to the tenant's quotas. Closed form: nothing loops over a spec's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from lecritique.config.critic_budget import spec_update_budget
from lecritique.config.experiment import ExperimentSpec
from lecritique.envs import environment_prompt_budget
from lecritique.replay.memory import trajectory_row_bytes


@dataclass(frozen=True)
class SpecWork:
    """The sizes of a spec's longest episode and its critic's generation (see the module docstring)."""

    prompt: int
    """The environment's first-prompt budget, in tokens."""
    response: int
    """``sampling.max_tokens`` x the environment's turn limit."""
    row_bytes: int
    """Bytes of one stored trajectory of that length (with the critic's context)."""
    critic: tuple[str, int] | None
    """(the arithmetic, tokens) the critic generates in one step; None: it generates none."""


def spec_work(spec: ExperimentSpec) -> SpecWork:
    prompt, response = environment_prompt_budget(spec.environment), spec.response_budget
    critic = spec.critic
    context = (critic.max_context_tokens or 0) if critic is not None else 0
    generation = None
    if critic is not None:
        budget = spec_update_budget(spec)
        updates = getattr(critic, "updates_per_step", 0) or (budget.nominal if budget else 0)
        turns = max(1, response // spec.rollout.sampling.max_tokens)
        made = critic.generation(spec.batch_size, turns, updates)
        generation = None if made is None else (made.what, made.tokens)
    return SpecWork(prompt, response, trajectory_row_bytes(prompt, response, context), generation)
