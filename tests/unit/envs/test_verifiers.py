"""The dataset environment's verifiers, each on its own."""

from __future__ import annotations

import threading
from fractions import Fraction
from typing import Any

import pytest
from pydantic import TypeAdapter

from lecritique.envs.verifiers import Verifier, VerifierConfig, build_verifier, parse_number
from tests.unit.envs.liveness import finishes

ROW = {"id": "row-7"}


def verifier(**config: Any) -> Verifier:
    return build_verifier(TypeAdapter(VerifierConfig).validate_python(config))


def rewards(v: Verifier, reference: str, answers: list[str]) -> list[float]:
    return [v.verify(answer, reference, ROW).reward for answer in answers]


def test_exact_match_after_normalisation() -> None:
    v = verifier(kind="exact")
    assert rewards(v, "Paris", ["paris", "  Paris. ", '"PARIS"', "Paris, France"]) == [1, 1, 1, 0]
    assert rewards(v, "New  York", ["new york", "newyork"]) == [1, 0]
    strict = verifier(kind="exact", case_sensitive=True, strip_punctuation=False)
    assert rewards(strict, "Paris", ["Paris", "paris", "Paris."]) == [1, 0, 0]
    with pytest.raises(ValueError, match="empty after normalisation"):
        v.check_reference("...")


def test_numbers_are_parsed_exactly() -> None:
    assert parse_number("1,234.5") == Fraction(24690, 20)
    assert parse_number("-7/8") == Fraction(-7, 8)
    assert parse_number("12%") == Fraction(12, 100)
    assert parse_number("$40.") == 40
    assert parse_number("2e3") == 2000
    for text in ("", "+", "1,23", "7/", "1/0", "twelve", "1.2.3", "0x10"):
        assert parse_number(text) is None, text


def test_numeric_tolerance() -> None:
    v = verifier(kind="numeric")
    assert rewards(v, "0.5", ["1/2", "0.5000001", "0.51", "half"]) == [1, 1, 0, 0]
    assert v.verify("half", "0.5", ROW).diagnostic == "not a number: 'half'"
    loose = verifier(kind="numeric", abs_tol=0.0, rel_tol=0.01)
    assert rewards(loose, "1000", ["1,009", "1011"]) == [1, 0]
    with pytest.raises(ValueError, match="reference 'n/a' is not a number"):
        v.check_reference("n/a")


def test_math_verify_compares_mathematics() -> None:
    v = verifier(kind="math_verify")
    assert rewards(
        v, "\\frac{1}{2}", ["0.5", "$\\frac{2}{4}$", "The answer is \\boxed{\\frac12}", "1/3"]
    ) == [1, 1, 1, 0]
    assert v.verify("no maths here", "\\frac{1}{2}", ROW).diagnostic.startswith("no mathematical answer")


def test_math_verify_works_on_worker_threads() -> None:
    """gRPC handlers run on worker threads, where math-verify's signal timeout raises."""
    v = verifier(kind="math_verify")
    results: list[float] = []
    worker = threading.Thread(target=lambda: results.extend(rewards(v, "42", ["42", "41", "x" * 100_000])))
    worker.start()
    worker.join(timeout=120)
    assert results == [1.0, 0.0, 0.0]


def test_regex_from_the_spec_or_the_row() -> None:
    around = verifier(kind="regex", pattern=r"(about )?{reference}( units)?")
    assert rewards(around, "3.5", ["3.5", "about 3.5 units", "3x5", "3.5 units!"]) == [1, 1, 0, 0]
    per_row = verifier(kind="regex", full_match=False, ignore_case=True)
    assert rewards(per_row, r"\bblue\b", ["It is BLUE.", "blueish"]) == [1, 0]
    with pytest.raises(ValueError, match="pattern does not compile"):
        verifier(kind="regex", pattern="(")


@pytest.mark.parametrize("per_row", [False, True])
def test_a_catastrophic_pattern_returns_promptly_with_a_reason(per_row: bool) -> None:
    """Issue #37: ``(a|aa)+$`` against 60 ``a`` and a ``b`` backtracks about 10^12 times; before the
    fix the verifier (spec pattern, or the row's reference as pattern) never returned, and held
    the GIL meanwhile. ``finishes`` is a liveness guard, not a speed assertion."""
    pattern = r"(a|aa)+$"
    v = verifier(kind="regex", full_match=False) if per_row else verifier(kind="regex", pattern=pattern)
    result = finishes(lambda: v.verify("a" * 60 + "b", pattern, ROW), seconds=60)
    assert result.reward == 0.0
    assert "time limit" in result.diagnostic
    assert v.verify("aaaa", pattern, ROW).reward == 1.0


def test_python_entry_point() -> None:
    v = verifier(kind="python", entry_point="tests.unit.envs.dataset_verifiers:within_one")
    assert [
        (r.reward, r.diagnostic) for r in (v.verify(a, "10", ROW) for a in ["10", "11", "30", "ten"])
    ] == [
        (1.0, "exact"),
        (0.5, "one off"),
        (0.0, "far off"),
        (0.0, "not an integer (row row-7)"),
    ]
    failing = verifier(kind="python", entry_point="tests.unit.envs.dataset_verifiers:broken")
    assert failing.verify("1", "1", ROW).diagnostic.startswith(
        "tests.unit.envs.dataset_verifiers:broken raised RuntimeError"
    )
    odd = verifier(kind="python", entry_point="tests.unit.envs.dataset_verifiers:not_a_reward")
    assert odd.verify("1", "1", ROW).diagnostic.endswith("returned \"'yes'\", not a reward")
    with pytest.raises(ValueError, match="cannot import 'tests.envs.no_such_module'"):
        verifier(kind="python", entry_point="tests.envs.no_such_module:f")
    with pytest.raises(ValueError, match="has no function 'NOT_CALLABLE'"):
        verifier(kind="python", entry_point="tests.unit.envs.dataset_verifiers:NOT_CALLABLE")
