"""The two tiers: ``tests/unit`` never leaves the process; everything else is ``tests/integration``.

The guard in ``tests/unit/conftest.py`` (:mod:`tests.unit.tier_guard`) stops a unit test that starts
a process, opens a socket, starts a server or builds a tiny model; the checks here keep every test
file in one of the two tiers, keep the unit tier's imports away from what only integration tests
need, and check that the guard really stops each way out.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from tests.unit.tier_guard import UnitTierViolation

TESTS = Path(__file__).resolve().parents[2]
UNIT, INTEGRATION = TESTS / "unit", TESTS / "integration"
FORBIDDEN_IN_UNIT = ("subprocess", "multiprocessing", "tests.integration", "tests.tiny_policies")
"""Modules a unit test has no use for: processes, the integration tier's helpers, trained tiny models."""


def _test_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py") if "__pycache__" not in path.parts)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_every_test_file_is_in_a_tier() -> None:
    outside = [str(path.relative_to(TESTS)) for path in _test_files() if not path.is_relative_to(UNIT)]
    outside = [name for name in outside if not (TESTS / name).is_relative_to(INTEGRATION)]
    assert outside == [], f"test files in neither tests/unit nor tests/integration: {outside}"


def test_the_tiers_split_the_suite() -> None:
    unit = [path for path in _test_files() if path.is_relative_to(UNIT)]
    integration = [path for path in _test_files() if path.is_relative_to(INTEGRATION)]
    assert len(unit) > 50 and len(integration) > 50, (len(unit), len(integration))
    names = [path.name for path in _test_files()]
    assert len(names) == len(set(names)), "two test files share a name (pytest imports them by name)"


def test_unit_tests_import_nothing_only_integration_needs() -> None:
    found = {}
    for path in sorted(UNIT.rglob("*.py")):
        if path.name in ("tier_guard.py", "test_tiers.py") or "__pycache__" in path.parts:
            continue  # the guard and its own test name what they stop
        bad = sorted(
            name
            for name in _imports(path)
            for forbidden in FORBIDDEN_IN_UNIT
            if name == forbidden or name.startswith(forbidden + ".")
        )
        if bad:
            found[str(path.relative_to(TESTS))] = bad
    assert found == {}, f"unit tests importing what only integration tests need: {found}"


def test_no_unit_test_is_marked_slow() -> None:
    slow = re.compile(r"@pytest\.mark\.slow\b")
    marked = [
        str(path.relative_to(TESTS)) for path in UNIT.rglob("test_*.py") if slow.search(path.read_text())
    ]
    assert marked == [], f"slow tests in the unit tier: {marked}"


def _process() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=False)


def _connect() -> None:
    with socket.socket() as client:
        client.connect(("127.0.0.1", 9))


def _listen() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))


def _fork() -> None:
    if os.fork() == 0:
        os._exit(0)


def _grpc_server() -> None:
    grpc.server(thread_pool=None)


def _tiny_build() -> None:
    from lecritique.tinybuild import build_tiny

    build_tiny("sudoku-mini", cache_dir="/nonexistent")


@pytest.mark.parametrize("leave", [_process, _connect, _listen, _fork, _grpc_server, _tiny_build])
def test_the_guard_stops_a_unit_test_that_leaves_the_process(leave) -> None:
    with pytest.raises(UnitTierViolation, match="tests/integration"):
        leave()


def test_the_guard_is_a_base_exception_so_code_under_test_cannot_swallow_it() -> None:
    def retrying() -> None:
        with contextlib.suppress(Exception):  # what a retry loop or a fallback does
            _connect()

    with pytest.raises(UnitTierViolation):
        retrying()
