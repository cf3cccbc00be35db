"""Fixtures of the API tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.kubernetes_recorder import RecordingApiServer


@pytest.fixture
def recorder() -> Iterator[RecordingApiServer]:
    """A recording stand-in for the Kubernetes API server (HTTP level only)."""
    server = RecordingApiServer()
    yield server
    server.close()
