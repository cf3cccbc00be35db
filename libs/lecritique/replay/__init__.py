"""Replay buffer of evaluated trajectories on Redis Streams, shared by the critic's trainers.

See :mod:`lecritique.replay.buffer` for the semantics and ``docs/replay.md`` for the keys; Redis
connections come from :mod:`lecritique.redis_connection`.
"""

from lecritique.replay.buffer import ReplayBuffer
from lecritique.replay.config import ReplayBounds, ReplayConfig
from lecritique.replay.records import ReplayConfigError, ReplayEntry, ReplayKeys, ReplayStats

__all__ = [
    "ReplayBounds",
    "ReplayBuffer",
    "ReplayConfig",
    "ReplayConfigError",
    "ReplayEntry",
    "ReplayKeys",
    "ReplayStats",
]
