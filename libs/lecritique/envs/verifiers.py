"""Answer verifiers of the ``dataset`` environment, chosen in the spec by ``kind``.

Each verifier compares the policy's extracted answer with a row's reference and returns a
:class:`~lecritique.envs.base.ScoreResult` (reward in [0, 1]); none raises on odd answers.

- ``exact``: equal after normalisation (whitespace collapsed, case folded, outer punctuation stripped);
- ``numeric``: both parse as numbers (``1,234``, ``-3.5``, ``7/8``, ``12%``) within a tolerance;
- ``math_verify``: Hugging Face's ``math-verify`` (LaTeX, ``\\boxed{}``, fractions, sets; extra ``math``);
- ``regex``: the answer matches a pattern (the spec's, with ``{reference}`` escaped in, or the row's),
  matched by the ``regex`` package under a time limit (a catastrophically backtracking pattern
  such as ``(a|aa)+$`` scores 0 with a reason instead of hanging the verifier);
- ``python``: ``module:function`` called as ``function(answer, reference, row)``.

``check_reference`` runs once per row when the dataset loads, so a reference the verifier can
never match (a non-number under ``numeric``, a broken per-row regex) is reported with its row.
"""

from __future__ import annotations

import importlib
import math
import re
import threading
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Annotated, Any, Literal, Protocol

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from lecritique.envs.answers import short
from lecritique.envs.base import ScoreResult

MAX_MATH_ANSWER_CHARS = 1_000
"""math-verify parses with sympy; without its signal timeout (worker threads) long inputs are cut."""

_NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][-+]?\d{1,4})?$")
"""A number as ``parse_number`` reads it; the exponent has at most four digits, because
``Fraction("1e99999999")`` builds a 10^8-digit integer holding the GIL for minutes (issue #46)."""
_OUTER_PUNCTUATION = " \t\n.,;:!?\"'`"


class _VerifierBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ExactVerifierConfig(_VerifierBase):
    kind: Literal["exact"] = "exact"
    """Equal after normalisation."""
    case_sensitive: bool = False
    """Compare letter case too."""
    strip_punctuation: bool = True
    """Ignore punctuation and quotes around the answer (``"Paris."`` equals ``Paris``)."""


class NumericVerifierConfig(_VerifierBase):
    kind: Literal["numeric"] = "numeric"
    """Both sides parse as numbers and agree within the tolerance."""
    abs_tol: float = Field(default=1e-6, ge=0.0)
    """Absolute tolerance."""
    rel_tol: float = Field(default=0.0, ge=0.0)
    """Relative tolerance (of the larger magnitude, as in ``math.isclose``)."""


class MathVerifyVerifierConfig(_VerifierBase):
    kind: Literal["math_verify"] = "math_verify"
    """Hugging Face math-verify (``pip install 'lecritique[math]'``)."""
    float_rounding: int = Field(default=6, ge=0, le=15)
    """Decimal places floats are rounded to before comparing."""
    timeout_seconds: int = Field(default=5, ge=1)
    """Parse / compare time limit where math-verify can use its signal timer (the main thread)."""


class RegexVerifierConfig(_VerifierBase):
    kind: Literal["regex"] = "regex"
    """The answer matches a regular expression."""
    pattern: str | None = None
    """Pattern; ``{reference}`` is replaced by the row's reference, escaped. None: the reference is the pattern."""
    full_match: bool = True
    """The whole answer must match (else: a match anywhere in it)."""
    ignore_case: bool = False
    """Case-insensitive matching."""
    timeout_seconds: float = Field(default=1.0, gt=0.0, le=60.0)
    """Time limit of one match; past it the answer scores 0 (the pattern backtracks catastrophically)."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                regex.compile(pattern.replace("{reference}", "x"))
            except regex.error as error:
                raise ValueError(f"pattern does not compile: {error}") from None
        return pattern


class PythonVerifierConfig(_VerifierBase):
    kind: Literal["python"] = "python"
    """Your own function, imported in the environment-verifier process."""
    entry_point: str = Field(json_schema_extra={"x-tenant-rule": "verifier_entry_point"})
    """``package.module:function``; called as ``function(answer, reference, row)`` and returning a
    bool, a reward in [0, 1], or ``(reward, diagnostic)``. The module must be importable there."""

    @field_validator("entry_point")
    @classmethod
    def _shape(cls, entry_point: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", entry_point):
            raise ValueError(f"entry_point must look like 'package.module:function', got {entry_point!r}")
        return entry_point


VerifierConfig = Annotated[
    ExactVerifierConfig
    | NumericVerifierConfig
    | MathVerifyVerifierConfig
    | RegexVerifierConfig
    | PythonVerifierConfig,
    Field(discriminator="kind"),
]
"""One verifier's configuration; ``kind`` selects it."""


class Verifier(Protocol):
    def check_reference(self, reference: str) -> None:
        """Raise ValueError when no answer could ever match ``reference``."""

    def verify(self, answer: str, reference: str, row: Mapping[str, Any]) -> ScoreResult:
        """Score an extracted answer against the row's reference."""


def _verdict(correct: bool, answer: str) -> ScoreResult:
    return ScoreResult(1.0, "correct") if correct else ScoreResult(0.0, f"wrong answer {short(answer)}")


class ExactVerifier:
    def __init__(self, config: ExactVerifierConfig) -> None:
        self.config = config

    def normalise(self, text: str) -> str:
        text = " ".join(text.split())
        if self.config.strip_punctuation:
            text = text.strip(_OUTER_PUNCTUATION)
        return text if self.config.case_sensitive else text.casefold()

    def check_reference(self, reference: str) -> None:
        if not self.normalise(reference):
            raise ValueError("the reference is empty after normalisation")

    def verify(self, answer: str, reference: str, row: Mapping[str, Any]) -> ScoreResult:
        return _verdict(self.normalise(answer) == self.normalise(reference), answer)


def parse_number(text: str) -> Fraction | float | None:
    """``text`` as an exact fraction (``1,234.5``, ``7/8``, ``-2e3``, ``12%``), or None."""
    text = text.strip().strip(_OUTER_PUNCTUATION).replace(" ", "")
    percent = text.endswith("%")
    text = text.removesuffix("%")
    if text.startswith("$"):
        text = text[1:]
    try:
        if "/" in text:
            numerator, _, denominator = text.partition("/")
            if (
                not (_NUMBER.match(numerator) and _NUMBER.match(denominator))
                or not numerator
                or not denominator
            ):
                return None
            value = Fraction(numerator.replace(",", "")) / Fraction(denominator.replace(",", ""))
        else:
            if not text or not _NUMBER.match(text) or text in "+-":
                return None
            value = Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None
    return value / 100 if percent else value


class NumericVerifier:
    def __init__(self, config: NumericVerifierConfig) -> None:
        self.config = config

    def check_reference(self, reference: str) -> None:
        if parse_number(reference) is None:
            raise ValueError(f"reference {short(reference)} is not a number")

    def verify(self, answer: str, reference: str, row: Mapping[str, Any]) -> ScoreResult:
        value = parse_number(answer)
        if value is None:
            return ScoreResult(0.0, f"not a number: {short(answer)}")
        expected = parse_number(reference)
        assert expected is not None  # checked when the dataset loaded
        try:
            close = value == expected or math.isclose(
                float(value), float(expected), rel_tol=self.config.rel_tol, abs_tol=self.config.abs_tol
            )
        except OverflowError:  # beyond a float (1e400): only an exact match counts
            close = False
        return _verdict(close, answer)


class MathVerifyVerifier:
    def __init__(self, config: MathVerifyVerifierConfig) -> None:
        self.config = config
        try:
            import math_verify  # imported here: sympy and the LaTeX grammar take ~1 s
        except ImportError:
            raise ValueError(
                "verifier 'math_verify' needs the math-verify package: pip install 'lecritique[math]'"
            ) from None
        self._math_verify = math_verify

    def _timeout(self) -> int | None:
        # math-verify times out with signal.alarm, which only the main thread may use; gRPC
        # handlers run on worker threads, where inputs are bounded by MAX_MATH_ANSWER_CHARS instead.
        return self.config.timeout_seconds if threading.current_thread() is threading.main_thread() else None

    def _parse(self, text: str) -> list[Any]:
        # A bare "70" or "1/2" has no LaTeX delimiters; math-verify's extractors find it anyway.
        parsed: list[Any] = self._math_verify.parse(
            text[:MAX_MATH_ANSWER_CHARS], parsing_timeout=self._timeout()
        )
        return parsed

    def check_reference(self, reference: str) -> None:
        if not self._parse(reference):
            raise ValueError(f"math-verify finds no mathematical answer in reference {short(reference)}")

    def verify(self, answer: str, reference: str, row: Mapping[str, Any]) -> ScoreResult:
        predicted = self._parse(answer)
        if not predicted:
            return ScoreResult(0.0, f"no mathematical answer in {short(answer)}")
        correct = self._math_verify.verify(
            self._parse(reference),
            predicted,
            float_rounding=self.config.float_rounding,
            timeout_seconds=self._timeout(),
        )
        return _verdict(bool(correct), answer)


class RegexVerifier:
    """Python's ``re`` has no time limit and holds the GIL while it backtracks: one pattern such as
    ``(a|aa)+$`` (the spec's or a row's) stalled the whole verifier. The ``regex`` package's matcher
    takes a ``timeout``."""

    def __init__(self, config: RegexVerifierConfig) -> None:
        self.config = config
        self._flags = regex.IGNORECASE if config.ignore_case else 0

    def _pattern(self, reference: str) -> Any:
        source = (
            reference
            if self.config.pattern is None
            else self.config.pattern.replace("{reference}", regex.escape(reference))
        )
        return regex.compile(source, self._flags)

    def check_reference(self, reference: str) -> None:
        try:
            self._pattern(reference)
        except regex.error as error:
            raise ValueError(f"the pattern does not compile: {error}") from None

    def verify(self, answer: str, reference: str, row: Mapping[str, Any]) -> ScoreResult:
        pattern = self._pattern(reference)
        timeout = self.config.timeout_seconds
        try:
            # concurrent: the GIL is released while matching (the answer is an immutable str).
            if self.config.full_match:
                matched = pattern.fullmatch(answer, timeout=timeout, concurrent=True)
            else:
                matched = pattern.search(answer, timeout=timeout, concurrent=True)
        except TimeoutError:
            return ScoreResult(
                0.0,
                f"the pattern did not finish matching {short(answer)} within its time limit of "
                f"{timeout:g} s (catastrophic backtracking)",
            )
        return _verdict(matched is not None, answer)


def load_entry_point(entry_point: str) -> Callable[..., Any]:
    """The function ``package.module:function`` names; ValueError when it cannot be imported."""
    module_name, _, function_name = entry_point.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"verifier entry point {entry_point!r}: cannot import {module_name!r}: {error}"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(
            f"verifier entry point {entry_point!r}: {module_name} has no function {function_name!r}"
        )
    return function  # type: ignore[no-any-return]


class PythonVerifier:
    def __init__(self, config: PythonVerifierConfig) -> None:
        self.config = config
        self.function = load_entry_point(config.entry_point)

    def check_reference(self, reference: str) -> None:
        """The user's function decides; nothing to check up front."""

    def verify(self, answer: str, reference: str, row: Mapping[str, Any]) -> ScoreResult:
        try:
            result = self.function(answer, reference, dict(row))
        except Exception as error:  # the user's code failing on odd text is a wrong answer, not a crash
            return ScoreResult(0.0, f"{self.config.entry_point} raised {error!r}"[:200])
        diagnostic = None
        if isinstance(result, tuple) and len(result) == 2:
            result, diagnostic = result
        if isinstance(result, bool | int | float) and math.isfinite(float(result)):
            reward = min(1.0, max(0.0, float(result)))
            return ScoreResult(
                reward,
                str(diagnostic)
                if diagnostic is not None
                else ("correct" if reward == 1.0 else f"scored {reward:.3g}"),
            )
        return ScoreResult(0.0, f"{self.config.entry_point} returned {short(repr(result))}, not a reward")


_VERIFIERS: dict[str, Callable[[Any], Verifier]] = {
    "exact": ExactVerifier,
    "numeric": NumericVerifier,
    "math_verify": MathVerifyVerifier,
    "regex": RegexVerifier,
    "python": PythonVerifier,
}


def build_verifier(config: BaseModel) -> Verifier:
    """The verifier a validated config describes."""
    return _VERIFIERS[str(getattr(config, "kind"))](config)  # noqa: B009
