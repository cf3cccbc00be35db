"""A fuzz of the spellings of a call in a CodeIO input (issue #46 item 3).

The round-3 check read the input's text with a regex (a name, optional whitespace, ``(``), so a
comment or a backslash-newline between a name and its parenthesis hid the call. Now the input is
read as Python reads it (tokens, syntax tree, and the text with comments and continuations
removed): every spelling generated here of a call the reference's strings never make is
refused, on the program (#1825) whose ``function_str`` the solver ``eval``s; the reference's own
strings and honest variations still pass.
"""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lecritique.envs.codeio import load_programs
from lecritique.envs.codeio_inputs import how_program_reads, refusal

SOLVER_PROGRAM = 1825
REFERENCE = {
    "function_str": "lambda x: x**3 - 2*x - 5",
    "interval": [2, 3],
    "error_tolerance": 0.001,
    "max_iterations": 20,
}


@cache
def solver_code() -> str:
    return str(load_programs()[SOLVER_PROGRAM]["code_sample"])


FORBIDDEN = [
    "globals",
    "vars",
    "locals",
    "eval",
    "exec",
    "getattr",
    "setattr",
    "compile",
    "open",
    "breakpoint",
    "input",
]
GAPS = st.lists(
    st.sampled_from([" ", "\t", "\x0c", "#\n", "# a comment\n", "\\\n", " \\\n ", "#)\n", "\n"]),
    min_size=0,
    max_size=3,
).map("".join)
WIDE = str.maketrans({chr(c): chr(c - 0x61 + 0xFF41) for c in range(0x61, 0x7B)})


@st.composite
def spelled_calls(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(FORBIDDEN))
    if draw(st.booleans()):
        name = name.translate(WIDE)  # full-width letters: NFKC (as Python reads names) undoes them
    call = f"{name}{draw(GAPS)}(){draw(st.sampled_from(['', '.update', '.get', '[0]']))}"
    if call.endswith((".update", ".get")):
        call += f"{draw(GAPS)}(rbisec=lambda *a: ([1], [2]))"
    shape = draw(
        st.sampled_from(
            [
                "[{c}, lambda x: x][1]",
                "({c}) or (lambda x: x)",
                "lambda x: x if {c} else x",
                "{c}",
                "[lambda x: x, {c}][0]",
            ]
        )
    )
    return shape.format(c=call)


def test_the_solver_program_evaluates_its_function_string() -> None:
    assert how_program_reads(solver_code()).evaluates
    assert refusal(REFERENCE, REFERENCE, solver_code()) is None


@settings(max_examples=300, deadline=None)
@given(spelled_calls())
def test_every_spelling_of_a_foreign_call_is_refused(function_str: str) -> None:
    candidate = dict(REFERENCE, function_str=function_str)
    why = refusal(candidate, REFERENCE, solver_code())
    assert why is not None and "'function_str'" in why, function_str


@pytest.mark.parametrize(
    "function_str",
    [
        "lambda x: x**3 - 2*x - 5",
        "lambda x: x**2 - 4",
        "lambda x: (x - 1) * (x + 2)",
        "lambda x: x**3 - 2*x - 5  # the same cubic",
        "lambda x: x**3 \\\n - 2*x - 5",
    ],
)
def test_honest_function_strings_still_pass(function_str: str) -> None:
    assert refusal(dict(REFERENCE, function_str=function_str), REFERENCE, solver_code()) is None
