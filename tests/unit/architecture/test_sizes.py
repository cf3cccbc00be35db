"""Size limits in libs/lecritique and services: they warn, and only a far larger size fails.

A module over 400 lines or a function over 60 is reported as a warning (``pytest -W error::SizeWarning``
makes it fail): it may be a sign that two concepts share a home, and it is the author's call whether
they do (issue #47: files were being split by line count, not by concept). A module over 600 lines or
a function over 100 fails: past that no single concept is still being read top to bottom.
"""

from __future__ import annotations

import ast
import warnings

from tests.unit.architecture.size_limits import SizeWarning

SOFT_MODULE_LINES, HARD_MODULE_LINES = 400, 600
SOFT_FUNCTION_LINES, HARD_FUNCTION_LINES = 60, 100

EXCLUDED = ()
"""Paths (prefixes) outside the limits: none. Generated code (``libs/lecritique/v1``) is never checked."""


def _checked(modules):
    return [m for m in modules.values() if not m.relative.startswith(EXCLUDED)]


def module_sizes(modules) -> dict[str, int]:
    return {m.relative: len(m.path.read_text().splitlines()) for m in _checked(modules)}


def function_sizes(modules) -> dict[str, int]:
    sizes = {}
    for module in _checked(modules):
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                sizes[f"{module.relative}:{node.lineno} {node.name}"] = node.end_lineno - node.lineno + 1
    return sizes


def _judge(sizes: dict[str, int], soft: int, hard: int, what: str) -> dict[str, int]:
    """Warn about every size past ``soft``; return those past ``hard``."""
    for name, size in sorted(sizes.items()):
        if size > soft:
            warnings.warn(
                f"{name}: {size} lines, over the {soft} a {what} usually needs", SizeWarning, stacklevel=2
            )
    return {name: size for name, size in sizes.items() if size > hard}


def test_no_module_is_over_600_lines_and_a_long_one_is_reported(modules):
    assert _judge(module_sizes(modules), SOFT_MODULE_LINES, HARD_MODULE_LINES, "module") == {}


def test_no_function_is_over_100_lines_and_a_long_one_is_reported(modules):
    assert _judge(function_sizes(modules), SOFT_FUNCTION_LINES, HARD_FUNCTION_LINES, "function") == {}


def test_a_long_function_warns_and_a_far_longer_one_fails():
    """Positive control of both limits on made-up sizes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        over_hard = _judge({"a.py:1 f": 61, "b.py:1 g": 101, "c.py:1 h": 60}, 60, 100, "function")
    assert over_hard == {"b.py:1 g": 101}
    assert sorted(str(w.message).split(":")[0] for w in caught if w.category is SizeWarning) == [
        "a.py",
        "b.py",
    ]
