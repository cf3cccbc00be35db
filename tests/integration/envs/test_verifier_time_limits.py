"""No answer can hold the verifier (issue #46 item 1), through a real verifier process over gRPC.

On main each hang below held the verifier: math-verify's signal timeout does not work in a gRPC
worker thread (``$9^{9^{9}}$`` never returned), ``coin_flip``'s ``Fraction('1e99999999')`` and
``propositional_logic`` on ``'¬'*16000 + 'p'`` held the GIL for minutes, and a 60,000-character
answer reached reasoning-gym's scorer. Now every scorer runs in a killable worker process under
the per-answer limit (``LECRITIQUE_ANSWER_SECONDS``, 6 s here), and the verifier answers its other
requests while one runs out its limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.envs.verifier_process import Verifier, verifier_process

pytestmark = pytest.mark.timeout(600)

LIMIT = 6.0
MATH_LIMIT = 3.0
ROWS = [{"prompt": f"What is {n} + {n}?", "answer": str(2 * n)} for n in range(1, 9)]


def _dataset(tmp: Path) -> str:
    path = tmp / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return str(path)


def _killed(metrics: str, reason: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("lecritique_env_scorers_killed_total{") and f'reason="{reason}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def _served_while_pending(verifier: Verifier, pending, honest: list) -> None:
    """The verifier's other requests come back while ``pending`` is still running out its limit."""
    assert verifier.info()["answer_seconds"] >= MATH_LIMIT
    assert len(verifier.tasks(3, seed=5)) == 3
    assert [reward for reward, _ in verifier.score(honest)] == [1.0] * len(honest)
    assert not pending.done(), "the hanging answer returned before the other requests were served"


@pytest.fixture(scope="module")
def math_verifier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Verifier, int]]:
    tmp = tmp_path_factory.mktemp("math-verify")
    environment = {"kind": "dataset", "path": _dataset(tmp), "verifier": {"kind": "math_verify"}}
    # Below math-verify's own 5-second timeout, which works in a worker's main thread: the kill
    # is what is under test here.
    with verifier_process(tmp, environment, answer_seconds=MATH_LIMIT) as running:
        yield running


@pytest.fixture(scope="module")
def gym_verifier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Verifier, int]]:
    tmp = tmp_path_factory.mktemp("reasoning-gym")
    environment = {
        "kind": "reasoning_gym",
        "datasets": {"coin_flip": 1, "propositional_logic": 1, "basic_arithmetic": 1},
    }
    with verifier_process(tmp, environment, answer_seconds=LIMIT) as running:
        yield running


def _of(verifier: Verifier, dataset: str, n: int = 1) -> list:
    tasks = [task for task in verifier.tasks(120, seed=3) if task.metadata["dataset"] == dataset]
    assert len(tasks) >= n, f"no {dataset} task sampled"
    return tasks[:n]


def test_math_verify_power_tower_is_killed_while_the_verifier_serves(math_verifier) -> None:
    verifier, metrics_port = math_verifier
    tasks = verifier.tasks(4)
    honest = [(task, str(task.reference)) for task in tasks]
    before = _killed(verifier.metrics(metrics_port), "timeout")
    pending = verifier.score_future([(tasks[0], "$9^{9^{9}}$")])
    _served_while_pending(verifier, pending, honest)
    [(reward, diagnostic)] = [(r.reward, r.diagnostic) for r in pending.result().results]
    assert reward == 0.0
    assert "per-answer limit" in diagnostic and "killed" in diagnostic
    assert _killed(verifier.metrics(metrics_port), "timeout") == before + 1
    # The killed worker is replaced; honest answers keep scoring.
    assert [reward for reward, _ in verifier.score(honest)] == [1.0] * len(honest)


def test_propositional_logic_negation_tower_is_killed(gym_verifier) -> None:
    verifier, metrics_port = gym_verifier
    [task] = _of(verifier, "propositional_logic")
    [other] = _of(verifier, "basic_arithmetic")
    before = _killed(verifier.metrics(metrics_port), "timeout")
    pending = verifier.score_future([(task, "<answer>" + "¬" * 16000 + "p</answer>")])
    _served_while_pending(verifier, pending, [(other, f"<answer>{other.reference}</answer>")])
    [result] = pending.result().results
    assert result.reward == 0.0 and "per-answer limit" in result.diagnostic
    assert _killed(verifier.metrics(metrics_port), "timeout") == before + 1


def test_coin_flip_huge_exponent_scores_zero_without_holding_the_verifier(gym_verifier) -> None:
    verifier, _ = gym_verifier
    [task] = _of(verifier, "coin_flip")
    [other] = _of(verifier, "basic_arithmetic")
    pending = verifier.score_future([(task, "<answer>1e99999999</answer>")])
    assert verifier.score([(other, f"<answer>{other.reference}</answer>")])[0][0] == 1.0
    [result] = pending.result().results
    assert result.reward == 0.0, result.diagnostic


def test_an_answer_over_the_length_limit_reaches_no_scorer(gym_verifier) -> None:
    verifier, _ = gym_verifier
    [task] = _of(verifier, "basic_arithmetic")
    [(reward, diagnostic)] = verifier.score([(task, "<answer>" + "1" * 60_000 + "</answer>")])
    assert reward == 0.0
    assert "longer than this environment's limit of 16384" in diagnostic
    # At the limit the answer is scored (here: wrong, by basic_arithmetic's own scorer).
    padded = f"<answer>{task.reference}</answer>" + " " * (16_384 - len(str(task.reference)) - 17)
    assert len(padded) == 16_384
    assert verifier.score([(task, padded)])[0][0] == 1.0


def test_a_slow_honest_answer_still_scores(tmp_path: Path) -> None:
    environment = {
        "kind": "dataset",
        "path": _dataset(tmp_path),
        "verifier": {"kind": "python", "entry_point": "tests.unit.envs.dataset_verifiers:slow_exact"},
    }
    with verifier_process(tmp_path, environment, answer_seconds=LIMIT) as (verifier, _):
        tasks = verifier.tasks(3)
        # Three 1.5-second answers in one batch: each within its own limit.
        scored = verifier.score([(task, str(task.reference)) for task in tasks])
        assert [reward for reward, _ in scored] == [1.0, 1.0, 1.0]
        assert verifier.score([(tasks[0], "wrong")])[0][0] == 0.0
