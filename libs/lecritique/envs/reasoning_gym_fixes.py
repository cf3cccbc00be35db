"""What some reasoning-gym scorers skip, checked around them: no constant answer wins (issue #46).

Found by the scorer audit (:mod:`lecritique.envs.audit`: degenerate answers over many tasks of
every dataset), each a reward of 1.0, or a large share of it, for an answer that ignores the task:

- ``puzzle24`` checks that four in-range numbers make 24, not that they are the task's: ``1*2*3*4``
  won every task. The numbers an answer uses must be the task's (as a multiset).
- ``coin_flip`` counted a one-character matching prefix as a full match (``0`` against
  ``0.234375``) and gave full credit within an absolute 1e-4 (``0`` for every probability below
  it). Its answer is now compared whole: full credit within a relative 1e-4, partial credit for
  the leading significant digits that agree at the same decimal exponent; a number with an
  exponent of more than three digits is refused before ``Fraction`` builds it.
- ``game_of_life_halting`` compared ``bool(answer)`` with ``bool("False")``: every non-empty answer
  won. The answer must be the literal ``True`` or ``False`` the task expects.
- ``complex_arithmetic`` paid ``nan``: ``min(1.0, exp(-nan))`` is 1.0. A non-finite answer scores 0.
- ``EXACT_ONLY``: datasets whose partial credit a constant collects (``game_of_life``: the empty
  grid matches most cells of most boards, 0.96 on average; ``polynomial_equations``: ``0`` is
  one root of many equations; ``time_intervals``: one fixed duration is close to many); there
  only a fully correct answer earns a reward.

And for every dataset: a non-finite reward (``inf`` from a scorer) scores 0, never 1.
"""

from __future__ import annotations

import cmath
import math
import re
from collections import Counter
from fractions import Fraction
from typing import Any

EXACT_ONLY = frozenset({"game_of_life", "polynomial_equations", "time_intervals"})
"""Datasets whose partial credit a constant answer collects: only full credit counts there."""

FIXES = {
    "puzzle24": "the numbers an answer uses must be the task's",
    "coin_flip": "the whole answer is compared (relative tolerance; digits at the same exponent)",
    "game_of_life_halting": "the answer must be the literal True/False the task expects",
    "complex_arithmetic": "a non-finite answer scores 0",
    **{name: "partial credit dropped: only a fully correct answer counts" for name in EXACT_ONLY},
}
"""What this module changes per dataset, as the audit's table reports it."""

_COIN_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d{1,3})?(/\d+(\.\d*)?([eE][-+]?\d{1,3})?)?")
_INTEGER = re.compile(r"\b\d+\b")
_COIN_TOLERANCE = 1e-4


def before_scorer(name: str, dataset: Any, answer: str, entry: dict[str, Any]) -> tuple[float, str] | None:
    """``(reward, diagnostic)`` where this module decides without the dataset's scorer, else None."""
    if name == "puzzle24":
        used = sorted(int(number) for number in _INTEGER.findall(answer))
        numbers = sorted(int(number) for number in entry.get("metadata", {}).get("numbers", ()))
        if Counter(used) != Counter(numbers):
            return 0.0, f"puzzle24: the answer uses the numbers {used[:8]}, the task's are {numbers}"
        return None
    if name == "coin_flip":
        return score_coin_flip(answer, str(entry.get("answer", "")))
    if name == "game_of_life_halting":
        expected = str(entry.get("answer", "")).strip().lower()
        literal = answer.strip().lower()
        if literal not in ("true", "false"):
            return 0.0, "game_of_life_halting: the answer must be True or False"
        return (1.0, "correct") if literal == expected else (0.0, "game_of_life_halting: wrong answer")
    if name == "complex_arithmetic":
        parse = getattr(dataset, "parse_string_to_complex", None)
        try:
            value = parse(answer) if parse is not None else None
        except Exception:  # upstream's own parser failing is its scorer's business (a wrong answer)
            return None
        if isinstance(value, complex) and not cmath.isfinite(value):
            return 0.0, "complex_arithmetic: a non-finite answer scores 0"
    return None


def after_scorer(name: str, reward: float) -> float:
    """The dataset's reward as the environment pays it: finite, in [0, 1], full credit only where required."""
    if not math.isfinite(reward):
        return 0.0
    reward = min(1.0, max(0.0, reward))
    if name in EXACT_ONLY and reward < 1.0:
        return 0.0
    return reward


def _coin_value(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not _COIN_NUMBER.fullmatch(text):
        return None
    try:
        value = float(Fraction(text))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _digits(value: float) -> tuple[str, int]:
    """Significant digits (trailing zeros dropped) and the decimal exponent of ``value``."""
    mantissa, _, exponent = f"{abs(value):.9e}".partition("e")
    return mantissa.replace(".", "").rstrip("0") or "0", int(exponent)


def score_coin_flip(answer: str, oracle: str) -> tuple[float, str]:
    """``coin_flip``'s reward, the whole answer compared (see the module docstring)."""
    value, expected = _coin_value(answer), _coin_value(oracle)
    if value is None or expected is None:
        return 0.0, "coin_flip: not a probability (a decimal or a fraction)"
    if math.isclose(value, expected, rel_tol=_COIN_TOLERANCE, abs_tol=0.0):
        return 1.0, "correct"
    if value == 0.0 or expected == 0.0 or (value < 0) != (expected < 0):
        return 0.0, "coin_flip: wrong answer"
    digits, exponent = _digits(value)
    oracle_digits, oracle_exponent = _digits(expected)
    if exponent != oracle_exponent:
        return 0.0, "coin_flip: wrong answer"
    agreeing = 0
    for mine, theirs in zip(digits, oracle_digits, strict=False):
        if mine != theirs:
            break
        agreeing += 1
    reward = agreeing / max(len(digits), len(oracle_digits))
    return reward, f"coin_flip: {agreeing} leading digits agree"
