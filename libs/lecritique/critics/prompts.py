"""Prompts of the text critics and the parsing of the frozen LLM's answer.

Generative critic (GenAC Figure 3, compacted): one prompt per state, with In-Context
Conditioning (the actor's description and smoothed average reward), the task, and the
trajectory so far; the critic answers with reasoning and ``score:N``.

Frozen LLM critic (LVRL): one chat per trajectory, with the group context (summaries of the
other attempts and their rewards) and the trajectory cut into segments, each marked ``[k]`` at
the state before it; the LLM answers one line per state, ``k: p`` with p in [0, 1].
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lecritique.critics.config import FrozenLLMConfig, GenerativeCriticConfig
from lecritique.critics.llm import Message
from lecritique.critics.states import TrajectoryText


def describe_actor(policy_dir: str | Path | None) -> str:
    """A short description of the policy for In-Context Conditioning: size and architecture."""
    if policy_dir is None:
        return "unknown policy"
    config_path = Path(policy_dir) / "config.json"
    try:
        config: dict[str, Any] = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError):
        return "unknown policy"
    hidden = int(config.get("hidden_size", 0))
    layers = int(config.get("num_hidden_layers", 0))
    vocab = int(config.get("vocab_size", 0))
    inter = int(config.get("intermediate_size", 4 * hidden))
    # Embeddings plus per-layer attention (4 h^2) and gated MLP (3 h i): a size class, not an exact count.
    parameters = vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * inter)
    size = f"{parameters / 1e9:.1f}B" if parameters >= 1e9 else f"{parameters / 1e6:.1f}M"
    return f"{size} {config.get('model_type', 'model')}"


def generative_instruction(config: GenerativeCriticConfig) -> str:
    if config.reasoning:
        return f"think briefly, then end with {config.score_tag}N\n"
    return f"\n{config.score_tag}"


def generative_prompt(
    config: GenerativeCriticConfig,
    *,
    context: str,
    actor: str,
    reward_average: float,
    prompt: str,
    prefix: str,
) -> str:
    """The critic prompt of one state."""
    return config.prompt_template.format(
        context=context,
        actor=actor,
        reward_average=reward_average,
        prompt=prompt,
        prefix=prefix,
        instruction=generative_instruction(config),
    )


def scored_text(config: GenerativeCriticConfig, completion: str) -> str:
    """The text the score is parsed from: direct scoring's prompt ends with the tag itself."""
    return completion if config.reasoning else config.score_tag + completion


@dataclass(frozen=True)
class PeerText:
    """A peer trajectory of the group, as the frozen critic sees it."""

    summary: str
    reward: float


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 3)] + "..."


def frozen_messages(
    config: FrozenLLMConfig, trajectory: TrajectoryText, peers: Sequence[PeerText], upto: int | None = None
) -> list[Message]:
    """The chat that asks for the value of every state of one trajectory (hindsight), or, with
    ``upto`` = k, of state k alone, showing only the segments before it (the prefix h_t)."""
    lines = ["Task:", trajectory.prompt_text.strip()]
    if trajectory.context_text:
        lines += ["Privileged context (not shown to the policy):", trajectory.context_text.strip()]
    shown = list(peers)[: config.max_peers]
    if shown:
        rate = sum(p.reward for p in shown) / len(shown)
        lines.append(f"Other attempts by the same policy (mean reward {rate:.2f}):")
        lines += [f"- reward {p.reward:.2f}: {_one_line(p.summary, config.max_peer_chars)}" for p in shown]
    if upto is None:
        lines.append("Attempt to score; [k] marks state k, the point just before the text that follows it:")
        for state in trajectory.states:
            lines.append(f"[{state.index}] {_one_line(state.segment_text, config.max_segment_chars)}")
        last = len(trajectory.states) - 1
        lines.append(
            f"For each state k = 0..{last}, estimate the probability that the policy succeeds from there. "
            "Answer with one line per state in the form 'k: p' (p between 0 and 1), nothing else."
        )
    else:
        # Prefix only: nothing the policy does from state ``upto`` on is shown (admissibility, eq. 5).
        lines.append("Attempt so far; [k] marks state k, the point just before the text that follows it:")
        for state in trajectory.states[:upto]:
            lines.append(f"[{state.index}] {_one_line(state.segment_text, config.max_segment_chars)}")
        lines.append(f"[{upto}] (the attempt continues from here)")
        lines.append(
            f"Estimate the probability that the policy succeeds from state {upto}. "
            f"Answer with one line in the form '{upto}: p' (p between 0 and 1), nothing else."
        )
    return [
        {"role": "system", "content": config.system_prompt},
        {"role": "user", "content": "\n".join(lines)},
    ]


_STATE_LINE = re.compile(r"^\s*\[?(\d+)\]?\s*[:=]\s*(-?\d*\.?\d+)\s*$")


def parse_state_values(text: str, num_states: int) -> list[float | None]:
    """Values of states 0..num_states-1 from ``k: p`` lines; None where a state is missing or invalid.

    A state answered twice keeps its first answer; values outside [0, 1] are invalid.
    """
    values: list[float | None] = [None] * num_states
    for line in text.splitlines():
        match = _STATE_LINE.match(line)
        if match is None:
            continue
        index, number = int(match.group(1)), float(match.group(2))
        if 0 <= index < num_states and values[index] is None and 0.0 <= number <= 1.0:
            values[index] = number
    return values
