"""Replay buffer of evaluated trajectories on Redis Streams, shared by the critic's trainers.

See :mod:`lecritique.replay.buffer` for the semantics and ``docs/replay.md`` for the keys.
"""

from lecritique.replay.buffer import ReplayBuffer, ReplayConfigError, ReplayEntry, ReplayKeys, ReplayStats
from lecritique.replay.config import ReplayConfig, RetryPolicy
from lecritique.replay.connection import (
    EmbeddedRedis,
    RedisUnavailableError,
    connect_redis,
    redis_client,
    start_embedded_redis,
)

__all__ = [
    "EmbeddedRedis",
    "RedisUnavailableError",
    "ReplayBuffer",
    "ReplayConfig",
    "ReplayConfigError",
    "ReplayEntry",
    "ReplayKeys",
    "ReplayStats",
    "RetryPolicy",
    "connect_redis",
    "redis_client",
    "start_embedded_redis",
]
