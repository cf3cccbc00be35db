"""Critic kinds behind one interface, as the value evaluator (and ``critic-eval``) serves them.

A backend turns critic queries (a trajectory with its critic context and group peers) into one
value per trajectory token, V(h_t), plus request statistics:

- ``discriminative``: the scalar-head critic (one forward pass per trajectory);
- ``generative``: GenAC's critic, one generated verbal score per segment state;
- ``frozen_llm``: LVRL's frozen LLM, one answer per trajectory scoring all its states.

Trained kinds (``trained = True``) are loaded from a published critic version and hot-swapped;
the frozen LLM has no versions (it is served as version 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from lecritique.critics.context import Peer
from lecritique.trajectory import Trajectory

CRITIC_KINDS: tuple[str, ...] = ("discriminative", "generative", "frozen_llm")


@dataclass(frozen=True)
class CriticQuery:
    """What a critic may read about one trajectory."""

    trajectory: Trajectory
    """The trajectory, with ``critic_context_ids`` set when the critic has a privileged context."""
    context_text: str = ""
    """The privileged context as text ("" for none)."""
    peers: tuple[Peer, ...] = ()
    """The other members of its group: summaries and rewards (never the trajectory itself)."""


@dataclass(frozen=True)
class ActorInfo:
    """In-Context Conditioning: what the critic is told about the current policy (GenAC §5.1)."""

    description: str = ""
    """Size / architecture of the actor."""
    reward_average: float = 0.0
    """Smoothed running average of the actor's reward."""


@dataclass
class CriticValues:
    values: list[np.ndarray]
    """float32 [T_i] per query: V(h_t) for every trajectory token."""
    stats: dict[str, float] = field(default_factory=dict)
    """Request statistics (states scored, parse failures, tokens, cost)."""
    version: int | None = None
    """Weight version that produced the values, when the backend knows it better than its caller."""


class CriticBackend(Protocol):
    trained: ClassVar[bool]
    """True when the kind has published versions (and a value trainer)."""

    def values(self, queries: list[CriticQuery], actor: ActorInfo) -> CriticValues:
        """Values of every query (same order)."""
        ...

    def close(self) -> None:
        """Free engines and connections."""
        ...


def group_baseline(query: CriticQuery, actor: ActorInfo) -> float:
    """The fallback value of a state whose score could not be parsed: the mean reward of the
    trajectory's peers (leave-one-out, so its own reward never leaks in), else the actor's average."""
    if query.peers:
        return float(np.mean([peer.reward for peer in query.peers]))
    return float(actor.reward_average)


def is_trained(kind: str) -> bool:
    if kind not in CRITIC_KINDS:
        raise ValueError(f"unknown critic kind {kind!r}; known: {', '.join(CRITIC_KINDS)}")
    return kind != "frozen_llm"


def build_backend(
    critic: Any, path: Path | None, *, policy_dir: str | Path, version: int = 0, experiment: str = ""
) -> CriticBackend:
    """The backend of ``critic.kind`` (a critic spec); ``path`` is the published version (None: frozen)."""
    kind = critic.kind
    if kind == "discriminative":
        from lecritique.critics.discriminative import DiscriminativeCritic

        if path is None:
            raise ValueError("a discriminative critic needs a published critic version")
        return DiscriminativeCritic(path, critic)
    if kind == "generative":
        from lecritique.critics.generative import GenerativeCritic

        if path is None:
            raise ValueError("a generative critic needs a published critic version")
        return GenerativeCritic(critic, path, policy_dir=policy_dir, version=version)
    if kind == "frozen_llm":
        from lecritique.critics.frozen_llm import FrozenLLMCritic

        return FrozenLLMCritic(critic, policy_dir=policy_dir, experiment=experiment)
    raise ValueError(f"unknown critic kind {kind!r}; known: {', '.join(CRITIC_KINDS)}")
