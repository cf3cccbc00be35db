"""Size limits: no module over 400 lines, no function over 60, in libs/lecritique and services."""

from __future__ import annotations

import ast

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

EXCLUDED = ()
"""Paths (prefixes) outside the limits: none. Generated code (``libs/lecritique/v1``) is never checked."""


def _checked(modules):
    return [m for m in modules.values() if not m.relative.startswith(EXCLUDED)]


def test_no_module_is_over_400_lines(modules):
    long = {
        m.relative: n
        for m in _checked(modules)
        if (n := len(m.path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines(modules):
    long = {}
    for module in _checked(modules):
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{module.relative}:{node.lineno} {node.name}"] = length
    assert long == {}
