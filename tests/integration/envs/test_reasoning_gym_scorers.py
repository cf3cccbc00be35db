"""Which reasoning-gym scorers run in the verifier, and that the sandboxed ones score as before.

The proof behind ``reasoning_gym_scoring.IN_PROCESS``: every registered dataset is fed answers
that would execute, in a separate interpreter with an audit hook (``reasoning_gym_probe.py``);
no dataset of the list may show any evidence of running them, and the nine known to run them
must (so that the detector is not blind).
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import reasoning_gym

from lecritique.envs import _reasoning_gym_sandboxed as sandboxed
from lecritique.envs import get_environment
from lecritique.envs import reasoning_gym_scoring as scoring
from lecritique.envs.answers import tagged
from lecritique.envs.reasoning_gym import registered_datasets
from lecritique.envs.reasoning_gym_fixes import FIXES
from tests.integration.envs.test_reasoning_gym_attacks import EVALUATING, PARSING, first_task

PROBE = Path(__file__).with_name("reasoning_gym_probe.py")
CHECKOUT = Path(__file__).resolve().parents[3]
REVIEWED = {
    "number_sorting": "eval()s the dataset's own reference (entry['answer']) when it is not JSON, never the answer",
}
"""Allow-listed scorers whose source calls an evaluating function, and why that is safe."""
EVALUATING_CALLS = {
    "eval",
    "exec",
    "compile",
    "__import__",
    "parse_expr",
    "sympify",
    "parse_latex",
    "lambdify",
}


def test_no_in_process_scorer_executes_an_answer(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(PROBE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": f"{CHECKOUT / 'libs'}:{CHECKOUT}"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    executing = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(EVALUATING + PARSING) <= set(executing), executing
    assert all("file" in executing[name] for name in EVALUATING + PARSING), executing
    assert sorted(set(executing) & scoring.IN_PROCESS) == []
    assert set(registered_datasets()) >= scoring.IN_PROCESS


def test_no_in_process_scorer_calls_an_evaluating_function_unreviewed() -> None:
    """The source of each allow-listed ``score_answer`` (a static second look beside the probe)."""
    from reasoning_gym.factory import DATASETS

    found = {}
    for name in sorted(scoring.IN_PROCESS):
        tree = ast.parse(textwrap.dedent(inspect.getsource(DATASETS[name][0].score_answer)))
        calls = {
            node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
        }
        if calls & EVALUATING_CALLS:
            found[name] = sorted(calls & EVALUATING_CALLS)
    assert set(found) == set(REVIEWED), found


@pytest.mark.parametrize("dataset", EVALUATING + PARSING)
def test_a_sandboxed_dataset_scores_as_reasoning_gym_does(dataset: str) -> None:
    """References and garbage score as reasoning-gym's own scorer scores them, on several entries."""
    environment = get_environment("reasoning_gym", datasets={dataset: 1})
    own = reasoning_gym.create_dataset(dataset, seed=1, size=1)
    for task in environment.sample_tasks(3, seed=4):
        entry = environment.entry(task)
        for answer in (str(task.reference), "garbage", ""):
            expected = min(1.0, own.score_answer(answer, entry))
            if dataset in FIXES and answer != str(task.reference):
                # puzzle24: an answer without the task's numbers scores 0, not upstream's 0.01
                # (issue #46; tests/integration/envs/test_scorer_audit.py).
                expected = 0.0
            assert environment.score(task, tagged(answer)).reward == pytest.approx(expected), (
                dataset,
                answer,
            )


@pytest.mark.parametrize("dataset", ["string_insertion", "spiral_matrix"])
def test_a_python_list_still_earns_its_partial_credit(dataset: str) -> None:
    """The scorers' ``eval`` became a literal parser: a list literal of the answer still scores 0.1."""
    environment, task = first_task(dataset)
    parts = list(str(task.reference)) if dataset == "string_insertion" else str(task.reference).split()
    assert environment.score(task, tagged(repr(parts))).reward == pytest.approx(0.1)


def test_a_dataset_the_sandbox_cannot_score_fails_when_the_environment_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_sympy = scoring.SCORING_SANDBOX.model_copy(
        update={"packages": tuple(p for p in scoring.PACKAGES if p != "sympy")}
    )
    monkeypatch.setattr(scoring, "SCORING_SANDBOX", without_sympy)
    with pytest.raises(ValueError, match=r"'countdown' executes answers.*sympy"):
        get_environment("reasoning_gym", datasets={"countdown": 1, "chain_sum": 1})
    assert get_environment("reasoning_gym", datasets={"chain_sum": 1}) is not None


@pytest.mark.parametrize(
    "answer", ["3*x**2 + 2*x - 5", "(25 + 3) * 4 - 7", "x**3/3 + sin(2*x) + C", "Integral(x*exp(x), x)", "5!"]
)
def test_arithmetic_answers_pass_the_check(answer: str) -> None:
    sandboxed.check_arithmetic(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "__import__('os').system('id')",
        "open('/tmp/x','w')",
        "x.__class__",
        "Symbol.func",
        "(lambda: 1)()",
        "sin(x)(2)",
        "eval('1')",
        "[1, 2]",
        "x := 1",
        "a; b",
        "'text'",
        'f"{x}"',
        "getattr(x, 'y')",
    ],
)
def test_code_does_not_pass_the_arithmetic_check(answer: str) -> None:
    with pytest.raises(ValueError, match="not allowed|may not call|not a function|not an expression"):
        sandboxed.check_arithmetic(answer)
