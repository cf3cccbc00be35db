"""How much one policy step of a spec makes its models generate, and how much its replay holds.

Every model that generates counts (issue #46, item 4: a generative critic's tokens were not
counted, so ``eval_samples`` 1024 x ``samples_per_state`` 1024 x ``max_tokens`` 32,768 x
``max_segments`` 4,096 was accepted). Per policy step, at most:

* the policy's rollouts: ``tasks_per_step`` x ``group_size`` x ``sampling.max_tokens``;
* a generative critic (GenAC §5): scoring, the batch's states x ``eval_samples`` completions,
  plus REINFORCE, per update ``max_train_states`` (else every state of a critic batch) x
  ``samples_per_state`` completions, ``updates_per_step`` updates (0, asynchronous: as many as the
  replay feeds on average, :func:`lecritique.replay.budget.update_budget`); each completion
  ``max_tokens``;
* a frozen LLM critic (LVRL): one answer of ``max_tokens`` per trajectory (``hindsight``) or per state;
* on a step that probes the critic: ``critic_probe.states`` x ``continuations`` continuations of the policy;
* on a step that evaluates: ``orchestrator.eval_tasks`` held-out episodes of the policy.

States per trajectory are the critic's ``segments.max_segments``, else (the ``turn`` rule) the
environment's turn limit. Each term is exact arithmetic on the spec's numbers (closed form: no loop
over them). Everything here reads the dumped spec (``spec.model_dump(mode="json")``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lecritique.replay.budget import update_budget
from lecritique.replay.memory import replay_bytes, trajectory_row_bytes


@dataclass(frozen=True)
class Sizes:
    """The longest episode a spec allows, in tokens."""

    prompt: int = 0
    """The environment's first-prompt budget."""
    response: int = 0
    """``sampling.max_tokens`` x the environment's turn limit."""


ONE_TURN = Sizes()
"""What is known without the environment: no prompt, one turn of ``sampling.max_tokens``."""


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


def _turns(rollout_tokens: int, sizes: Sizes) -> int:
    return max(1, sizes.response // rollout_tokens) if rollout_tokens else 1


def _states(critic: dict[str, Any], turns: int) -> tuple[int, str]:
    segments = critic.get("segments") or {}
    cap = segments.get("max_segments")
    if isinstance(cap, int):
        return cap, f"segments.max_segments {cap}"
    return turns, f"{turns} turns"


def _generative(critic: dict[str, Any], batch: int, states: int, said: str) -> Generation:
    samples, tokens = _int(critic.get("eval_samples"), 1), _int(critic.get("max_tokens"), 1)
    scoring = batch * states * samples * tokens
    per_update_states = critic.get("max_train_states")
    critic_batch = _int(critic.get("batch_size"), batch) or batch
    replay = critic.get("replay") or {}
    budget = update_budget(
        batch, critic_batch, max(1, _int(replay.get("max_reuse"), 1)), max(1, _int(replay.get("capacity"), 1))
    )
    updates = _int(critic.get("updates_per_step")) or budget.nominal
    trained_states = (
        min(_int(per_update_states), critic_batch * states)
        if isinstance(per_update_states, int)
        else critic_batch * states
    )
    per_state = _int(critic.get("samples_per_state"), 1)
    training = updates * trained_states * per_state * tokens
    what = (
        f"scoring {batch} trajectories x {said} x eval_samples {samples} x max_tokens {tokens} = {scoring}, "
        f"plus REINFORCE {updates} updates x {trained_states} states x samples_per_state {per_state} x "
        f"max_tokens {tokens} = {training}"
    )
    return Generation("critic", what, scoring + training)


def _frozen(critic: dict[str, Any], batch: int, states: int, said: str) -> Generation:
    tokens = _int(critic.get("max_tokens"), 1)
    if critic.get("hindsight", True):
        return Generation("critic", f"{batch} trajectories x max_tokens {tokens} (hindsight)", batch * tokens)
    return Generation(
        "critic",
        f"{batch} trajectories x {said} x max_tokens {tokens}",
        batch * states * tokens,
    )


def generation_per_step(data: dict[str, Any], sizes: Sizes) -> list[Generation]:
    """The tokens each generating model of a dumped spec takes in its busiest policy step."""
    rollout = data.get("rollout") or {}
    tasks, group = _int(rollout.get("tasks_per_step")), _int(rollout.get("group_size"))
    max_tokens = _int((rollout.get("sampling") or {}).get("max_tokens"))
    batch = tasks * group
    found = [
        Generation(
            "rollout",
            f"tasks_per_step {tasks} x group_size {group} x sampling.max_tokens {max_tokens}",
            batch * max_tokens,
        )
    ]
    critic = data.get("critic")
    if isinstance(critic, dict):
        states, said = _states(critic, _turns(max_tokens, sizes))
        if critic.get("kind") == "generative":
            found.append(_generative(critic, batch, states, said))
        elif critic.get("kind") == "frozen_llm":
            found.append(_frozen(critic, batch, states, said))
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
    """(the arithmetic, bytes) of a full replay buffer of a dumped spec's critic; None without one."""
    critic = data.get("critic")
    if not isinstance(critic, dict):
        return None  # no critic, no replay buffer (an untrained critic's buffer still fills to capacity)
    replay = critic.get("replay")
    if not isinstance(replay, dict):
        return None
    capacity = _int(replay.get("capacity"))
    context = _int(critic.get("max_context_tokens"))
    row = trajectory_row_bytes(sizes.prompt, sizes.response, context)
    what = (
        f"critic.replay.capacity {capacity} trajectories x {row} bytes each (prompt {sizes.prompt} and "
        f"{sizes.response} response tokens{f', context {context}' if context else ''}) = "
        f"{replay_bytes(capacity, row)} bytes"
    )
    return what, replay_bytes(capacity, row)
