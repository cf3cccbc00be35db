"""How much one policy step of a spec makes its models generate, and how much its replay holds.

Every model that generates counts (issue #46, item 4: a generative critic's tokens were not
counted, so ``eval_samples`` 1024 x ``samples_per_state`` 1024 x ``max_tokens`` 32,768 x
``max_segments`` 4,096 was accepted). Per policy step, at most:

* the policy's rollouts: ``tasks_per_step`` x ``group_size`` x ``sampling.max_tokens``;
* the critic's own generation, as its kind declares it (``generation`` on the critic's spec class: a
  generative critic's scoring and REINFORCE samples, a frozen LLM critic's answers), computed by
  the caller with the validated spec (:func:`lecritique.config.work.spec_work`);
* on a step that probes the critic: ``critic_probe.states`` x ``continuations`` continuations of the policy;
* on a step that evaluates: ``orchestrator.eval_tasks`` held-out episodes of the policy.

A full replay buffer holds ``critic.replay.capacity`` rows of the longest trajectory's bytes. Each
term is exact arithmetic on the spec's numbers (closed form: no loop over them). Everything here
reads the dumped spec (``spec.model_dump(mode="json")``) and what :class:`Sizes` adds to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sizes:
    """What the dumped spec does not hold (:class:`lecritique.config.work.SpecWork` computes it)."""

    prompt: int = 0
    """The environment's first-prompt budget, in tokens."""
    response: int = 0
    """``sampling.max_tokens`` x the environment's turn limit."""
    row_bytes: int = 0
    """Bytes of one stored trajectory at most (0: unknown, the replay's memory is not counted)."""
    critic: tuple[str, int] | None = None
    """(the arithmetic, tokens) the critic generates in one step; None: none, or not known yet."""


ONE_TURN = Sizes()
"""What is known before validation: the numbers the tenant wrote, nothing the environment or the critic adds."""


@dataclass(frozen=True)
class Generation:
    """Tokens one model generates in one policy step."""

    field: str
    """The spec section that sets it (what a refusal names)."""
    what: str
    """The arithmetic, with the spec's field names and numbers."""
    tokens: int


def _int(value: Any, default: int = 0) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def generation_per_step(data: dict[str, Any], sizes: Sizes) -> list[Generation]:
    """The tokens each generating model of a dumped spec takes in its busiest policy step."""
    rollout = data.get("rollout") or {}
    tasks, group = _int(rollout.get("tasks_per_step")), _int(rollout.get("group_size"))
    max_tokens = _int((rollout.get("sampling") or {}).get("max_tokens"))
    found = [
        Generation(
            "rollout",
            f"tasks_per_step {tasks} x group_size {group} x sampling.max_tokens {max_tokens}",
            tasks * group * max_tokens,
        )
    ]
    if sizes.critic is not None:
        found.append(Generation("critic", *sizes.critic))
    probe = data.get("critic_probe")
    if isinstance(probe, dict):
        probed, continuations = _int(probe.get("states")), _int(probe.get("continuations"))
        found.append(
            Generation(
                "critic_probe",
                f"states {probed} x continuations {continuations} x sampling.max_tokens {max_tokens}",
                probed * continuations * max_tokens,
            )
        )
    orchestrator = data.get("orchestrator") or {}
    if orchestrator.get("eval_every") is not None:
        eval_tasks = _int(orchestrator.get("eval_tasks"))
        found.append(
            Generation(
                "orchestrator.eval_tasks",
                f"eval_tasks {eval_tasks} x sampling.max_tokens {max_tokens}",
                eval_tasks * max_tokens,
            )
        )
    return found


def replay_memory(data: dict[str, Any], sizes: Sizes) -> tuple[str, int] | None:
    """(the arithmetic, bytes) of a full replay buffer of a dumped spec's critic; None without a
    critic (an untrained critic's buffer still fills to its capacity) or without a row size."""
    critic = data.get("critic")
    replay = critic.get("replay") if isinstance(critic, dict) else None
    if not isinstance(replay, dict) or sizes.row_bytes <= 0:
        return None
    capacity = _int(replay.get("capacity"))
    what = (
        f"critic.replay.capacity {capacity} trajectories x {sizes.row_bytes} bytes each (prompt "
        f"{sizes.prompt} and {sizes.response} response tokens) = {capacity * sizes.row_bytes} bytes"
    )
    return what, capacity * sizes.row_bytes
