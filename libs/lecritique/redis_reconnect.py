"""Retrying Redis calls: a call that loses its connection is made again with exponential backoff,
one log line per attempt, until the retry budget is spent; then :class:`RedisUnavailableError`
names the server. Every Redis call the replay buffer makes goes through :func:`call_with_reconnect`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)


class RetryPolicy(BaseModel):
    """How long a Redis call keeps reconnecting before it gives up with a clear error."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=12, ge=1)
    """Attempts per operation, the first included (1: fail on the first connection error)."""
    initial_backoff_s: float = Field(default=0.05, ge=0.0)
    """Wait before the second attempt."""
    max_backoff_s: float = Field(default=5.0, ge=0.0)
    """Upper bound of one wait between attempts."""
    multiplier: float = Field(default=2.0, ge=1.0)
    """Factor applied to the wait after every failed attempt (exponential backoff)."""

    def delays(self) -> list[float]:
        """The waits between consecutive attempts (``max_attempts - 1`` of them)."""
        delays: list[float] = []
        delay = self.initial_backoff_s
        for _ in range(self.max_attempts - 1):
            delays.append(min(delay, self.max_backoff_s))
            delay *= self.multiplier
        return delays


T = TypeVar("T")

# Errors after which the same call may succeed once the server is back. BusyLoadingError (the
# server is replaying its AOF after a restart) is a subclass of ConnectionError.
_TRANSIENT_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)


class RedisUnavailableError(ConnectionError):
    """Redis could not be reached within the retry budget; nothing was reported as stored."""


def describe_client(client: redis.Redis) -> str:
    """The server a client talks to, as a URL without credentials (for log lines and errors)."""
    kwargs = client.connection_pool.connection_kwargs
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}"
    return f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def call_with_reconnect(
    operation: Callable[[], T],
    *,
    client: redis.Redis,
    policy: RetryPolicy,
    what: str,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``operation``; on connection errors reconnect with backoff up to ``policy.max_attempts``.

    redis-py drops a broken connection from its pool, so the next attempt opens a fresh one.
    ``on_retry`` is called once per retry (metrics).
    """
    delays = policy.delays()
    started = time.monotonic()
    last_error: Exception | None = None
    for attempt in range(1, policy.max_attempts + 1):
        try:
            result = operation()
        except _TRANSIENT_ERRORS as error:
            last_error = error
            if attempt == policy.max_attempts:
                break
            delay = delays[attempt - 1]
            logger.warning(
                "Redis at %s unavailable during %s (%s: %s); reconnecting in %.2f s (attempt %d of %d)",
                describe_client(client),
                what,
                type(error).__name__,
                error,
                delay,
                attempt + 1,
                policy.max_attempts,
            )
            if on_retry is not None:
                on_retry()
            time.sleep(delay)
            continue
        if attempt > 1:
            logger.info(
                "Reconnected to Redis at %s for %s after %d attempts", describe_client(client), what, attempt
            )
        return result
    raise RedisUnavailableError(
        f"Redis at {describe_client(client)} unreachable during {what}: gave up after "
        f"{policy.max_attempts} attempts over {time.monotonic() - started:.1f} s "
        f"(last error: {type(last_error).__name__}: {last_error})"
    ) from last_error
