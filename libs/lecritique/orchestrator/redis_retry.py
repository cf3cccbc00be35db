"""Redis writes of the orchestrator survive a Redis restart (the replay stream and metrics series).

Redis runs with AOF: after a restart it comes back with every acknowledged write. A write that
fails because Redis is down is retried with backoff for ``orchestrator.service_down_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis

logger = logging.getLogger(__name__)

T = TypeVar("T")


def retry_redis(action: Callable[[], T], seconds: float, what: str) -> T:
    """``action()``, retried while Redis is unreachable (or loading its AOF) for up to ``seconds``."""
    give_up = time.monotonic() + seconds
    pause = 0.2
    while True:
        try:
            return action()
        except (redis.ConnectionError, redis.TimeoutError) as error:
            if time.monotonic() + pause > give_up:
                raise
            logger.warning("Redis unreachable during %s (%s); retrying in %.1f s", what, error, pause)
        time.sleep(pause)
        pause = min(pause * 2, 5.0)
