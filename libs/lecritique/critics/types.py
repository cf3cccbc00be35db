"""What every critic kind reads and answers: queries, actor information, values, the backend interface.

A backend turns critic queries (a trajectory with its critic context and group peers) into one
value per trajectory token, V(h_t), plus request statistics. The kinds, and which backend each
uses, are declared in :mod:`lecritique.critics.kinds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from lecritique.trajectory import Trajectory

CriticContextKind = Literal["none", "reference", "loo_group", "reference_loo_group"]
"""Privileged context kinds (:mod:`lecritique.critics.inputs` builds them)."""
CRITIC_CONTEXT_KINDS: tuple[str, ...] = ("none", "reference", "loo_group", "reference_loo_group")
GROUP_CONTEXT_KINDS: tuple[str, ...] = ("loo_group", "reference_loo_group")
"""Context kinds that show a trajectory's siblings (they need groups of at least 2)."""
PEER_SUMMARY_CHARS = 160
"""Characters of one peer summary, unless the critic configures it (``max_peer_chars``)."""


@dataclass(frozen=True)
class Peer:
    """Another member of a trajectory's group, summarised for group-context critics (LVRL)."""

    trajectory_id: str
    summary: str
    """Short text: what the peer did and how it ended."""
    reward: float


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
    def values(self, queries: list[CriticQuery], actor: ActorInfo) -> CriticValues:
        """Values of every query (same order)."""
        ...

    def reload(self, version: int, path: Path) -> bool:
        """Swap in a newly published version in place; False when the backend must be rebuilt instead."""
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
