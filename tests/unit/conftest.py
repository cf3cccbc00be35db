"""The unit tier: each test runs under :func:`tests.unit.tier_guard.guard`, which stops it from
starting a process, opening a socket, starting a server or building a tiny model (a test that needs
one belongs in ``tests/integration``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.tier_guard import guard

UNIT = Path(__file__).resolve().parent


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with guard():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with guard():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The test's own fixtures are torn down guarded; where the next test is not a unit test (or
    none follows), the fixtures of other folders and of the session are torn down here too, and
    stopping their servers is no unit test's doing."""
    if nextitem is None or UNIT not in nextitem.path.parents:
        return (yield)
    with guard():
        return (yield)
