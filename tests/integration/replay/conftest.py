"""Fixtures of the replay tests: buffers on the session's real redis-server."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from lecritique.replay import ReplayBuffer

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def make_buffer(redis_db: redis.Redis, request: pytest.FixtureRequest) -> Callable[..., ReplayBuffer[Any]]:
    """``make_buffer(capacity=..., ...)``: a buffer on a freshly emptied server, named after the test."""
    experiment = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:100]

    def make(**kwargs: Any) -> ReplayBuffer[Any]:
        kwargs.setdefault("experiment", experiment)
        return ReplayBuffer(redis_db, **kwargs)

    return make


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for child Python processes: this checkout's sources first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "libs"), str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env
