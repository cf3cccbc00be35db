"""CodeIO input prediction: a candidate input is data, it cannot replace the program (issue #37).

Program #1825 of the shipped set ``eval``s its ``function_str``. Before the fix an input whose
``function_str`` replaced the solver (``rbisec``) so that it returned the target output scored 1.0;
an honest wrong input 0.0. Now the candidate is checked as a literal of the program's argument
types (``lecritique.envs.codeio_inputs``) before the program runs in the sandbox.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lecritique.envs import Task, get_environment
from lecritique.envs.answers import tagged
from lecritique.envs.codeio import CodeIOEnvironment
from lecritique.envs.codeio_inputs import how_program_reads, refusal

SOLVER_PROGRAM = 1825


@pytest.fixture(scope="module")
def env() -> CodeIOEnvironment:
    environment = get_environment("codeio")
    assert isinstance(environment, CodeIOEnvironment)
    return environment


@pytest.fixture(scope="module")
def solver_task(env: CodeIOEnvironment) -> Task:
    """Input prediction on #1825, with a target of several bisection steps."""
    for seed in range(20):
        task = env._generate(SOLVER_PROGRAM, seed, "input")
        if task is not None and len(task.metadata["output"]["hx"]) > 2:
            return task
    raise AssertionError("no input-prediction task of program #1825")


def overriding(task: Task, function_str: str) -> str:
    """An input whose ``function_str`` is ``function_str`` with the target's lists spliced in."""
    output = task.metadata["output"]
    text = function_str.replace("HX", repr(output["hx"])).replace("HF", repr(output["hf"]))
    return json.dumps({"function_str": text, "interval": [0, 1], "error_tolerance": 0.1, "max_iterations": 1})


@pytest.mark.parametrize(
    "function_str",
    [
        "[globals().update(rbisec=lambda *a: (HX, HF)), lambda x: x][1]",
        "[globals().update(rbisec=lambda*a:(HX,HF)),lambda x:x][1]",
        "(globals().__setitem__('rbisec', lambda *a: (HX, HF)), lambda x: x)[1]",
        "[__import__('sys')._getframe(0).f_globals.update(rbisec=lambda *a: (HX, HF)), abs][1]",
        "[ｇｌｏｂａｌｓ().update(rbisec=lambda *a: (HX, HF)), abs][1]",
        "[(lambda g: g.update(rbisec=lambda *a: (HX, HF)))(globals()), abs][1]",
        # Issue #46: a comment, or a backslash-newline, between each name and its parenthesis
        # (1.0 after the round-3 fix, whose regex read the text, not the tokens).
        "[globals #\n().update #\n(rbisec=lambda *a: (HX, HF)), lambda x: x][1]",
        "[globals\\\n().update\\\n(rbisec=lambda *a: (HX, HF)), lambda x: x][1]",
        "[globals #\\\n\n().update(rbisec=lambda *a: (HX, HF)), lambda x: x][1]",
        "[vars #\n()['rbisec'] if 0 else lambda x: x][0]",
    ],
)
def test_an_input_cannot_replace_the_program(
    env: CodeIOEnvironment, solver_task: Task, function_str: str
) -> None:
    """Before: 1.0 (the replaced solver returned the target)."""
    result = env.score(solver_task, tagged(overriding(solver_task, function_str)))
    assert result.reward == 0.0, result.diagnostic
    assert "argument 'function_str'" in result.diagnostic


def test_honest_inputs_still_score_as_before(env: CodeIOEnvironment, solver_task: Task) -> None:
    assert env.score(solver_task, tagged(str(solver_task.reference))).reward == 1.0
    wrong = dict(solver_task.metadata["inputs"], function_str="lambda x: x**2 - 4")
    result = env.score(solver_task, tagged(json.dumps(wrong)))
    assert result.reward == 0.0 and "produces" in result.diagnostic
    inverted = dict(solver_task.metadata["inputs"], function_str="lambda x: abs(x) * x + 0.0")
    assert "produces" in env.score(solver_task, tagged(json.dumps(inverted))).diagnostic


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ([1, 2], "JSON object"),
        ({"function_str": "lambda x: x"}, "the program's arguments are"),
        (
            {"function_str": 1, "interval": [0, 1], "error_tolerance": 0.1, "max_iterations": 1},
            "'function_str'",
        ),
        (
            {
                "function_str": "lambda x: x",
                "interval": [0, "1"],
                "error_tolerance": 0.1,
                "max_iterations": 1,
            },
            "'interval'",
        ),
        (
            {
                "function_str": "lambda x: x",
                "interval": [0, 1],
                "error_tolerance": 0.1,
                "max_iterations": 1.5,
            },
            "'max_iterations'",
        ),
        (
            {"function_str": "lambda x: x", "interval": [0, 1], "error_tolerance": True, "max_iterations": 1},
            "'error_tolerance'",
        ),
    ],
)
def test_an_input_of_other_types_is_refused_before_it_runs(
    env: CodeIOEnvironment, solver_task: Task, candidate: Any, reason: str
) -> None:
    result = env.score(solver_task, tagged(json.dumps(candidate)))
    assert result.reward == 0.0 and reason in result.diagnostic and "produces" not in result.diagnostic


EXEC_PROGRAM = """
def check(f, x):
    return f(x) == x * 2

def main_solution(function_str, x):
    exec(f"f = {function_str}", globals())
    return check(f, x)
"""


@pytest.mark.parametrize(
    "function_str",
    [
        "lambda x: x\ncheck = lambda f, x: True",
        "lambda x: x; check = lambda f, x: True",
        "check = lambda f, x: True",
        "(check := lambda f, x: True)",
    ],
)
def test_a_program_that_executes_its_input_gets_no_statement(function_str: str) -> None:
    reference = {"function_str": "lambda x: x * 2", "x": 3}
    candidate = {"function_str": function_str, "x": 3}
    assert how_program_reads(EXEC_PROGRAM).statements
    assert refusal(reference, reference, EXEC_PROGRAM) is None
    why = refusal(candidate, reference, EXEC_PROGRAM)
    assert why is not None and "'function_str'" in why


def test_strings_of_a_program_that_never_evaluates_them_are_plain_data() -> None:
    code = "def main_solution(words):\n    return sorted(words)\n"
    assert not how_program_reads(code).evaluates
    assert refusal({"words": ["print(1)", "__init__", "a; b = c"]}, {"words": ["x"]}, code) is None
    reads = "import sympy\ndef main_solution(expression):\n    return str(sympy.simplify(expression))\n"
    assert how_program_reads(reads).evaluates and not how_program_reads(reads).statements
    assert refusal({"expression": "sin(x)**2 + cos(x)**2"}, {"expression": "x + 1"}, reads) is None
    assert refusal({"expression": "x.__class__"}, {"expression": "x + 1"}, reads) is not None
    assert refusal({"expression": "x, y), exit(1"}, {"expression": "x + 1"}, reads) is not None


def test_a_json_unicode_escape_spells_the_same_call(env: CodeIOEnvironment, solver_task: Task) -> None:
    """``\\u0067lobals`` in the answer's JSON is ``globals`` once decoded: refused as that."""
    output = solver_task.metadata["output"]
    override = (
        f"[\\u0067lobals #\\n().update(rbisec=lambda *a: ({output['hx']!r}, {output['hf']!r})), abs][1]"
    )
    text = (
        '{"function_str": "'
        + override
        + '", "interval": [0, 1], "error_tolerance": 0.1, "max_iterations": 1}'
    )
    assert json.loads(text)["function_str"].startswith("[globals #\n()")
    result = env.score(solver_task, tagged(text))
    assert result.reward == 0.0 and "argument 'function_str'" in result.diagnostic
