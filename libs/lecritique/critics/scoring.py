"""Parse the generative critic's verbal score (GenAC §5.1).

The critic reasons in text, then states an integer score from 0 to 10 for the actor's chance of
success, written ``<tag><integer>`` (default tag ``score:``, e.g. ``... so score:7``). The score is
normalised to a value in [0, 1]. Anything else is a parse failure with a reason, never an
exception: the caller counts it and falls back to a baseline value.

Rules, in order: no tag followed by a number -> ``missing``; the tag stated more than once ->
``multiple`` (an ambiguous answer earns no credit, which keeps the REINFORCE signal about one
stated score); a number that is not an integer -> ``not_integer``; an integer outside
``0..max_score`` -> ``out_of_range``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ParseFailure = Literal["missing", "multiple", "not_integer", "out_of_range"]
PARSE_FAILURES: tuple[ParseFailure, ...] = ("missing", "multiple", "not_integer", "out_of_range")


@dataclass(frozen=True)
class ParsedScore:
    """The outcome of parsing one critic completion."""

    value: float | None
    """Normalised value in [0, 1], or None when parsing failed."""
    score: int | None
    """The stated integer score, or None when parsing failed."""
    failure: ParseFailure | None
    """Why parsing failed (None on success)."""

    @property
    def ok(self) -> bool:
        return self.value is not None


def _pattern(tag: str) -> re.Pattern[str]:
    # Whitespace is tolerated before the tag's punctuation ("score : 7"). A sign and a decimal part
    # are captured so that "-3" and "7.5" are reported, not misread as 3 and 7.
    parts = [re.escape(c) if c.isalnum() else r"\s*" + re.escape(c) for c in tag.strip()]
    return re.compile("".join(parts) + r"\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_score(text: str, tag: str = "score:", max_score: int = 10) -> ParsedScore:
    """The score stated in ``text`` as ``<tag><integer in 0..max_score>``, normalised by ``max_score``."""
    if max_score < 1:
        raise ValueError(f"max_score must be >= 1, got {max_score}")
    matches = _pattern(tag).findall(text)
    if not matches:
        return ParsedScore(None, None, "missing")
    if len(matches) > 1:
        return ParsedScore(None, None, "multiple")
    number = matches[0]
    if "." in number:
        return ParsedScore(None, None, "not_integer")
    score = int(number)
    if not 0 <= score <= max_score:
        return ParsedScore(None, None, "out_of_range")
    return ParsedScore(score / max_score, score, None)


def critic_reward(parsed: ParsedScore, target: float) -> float:
    """GenAC §5.2's rule-based reward R_v = 1 - (r - v)^2, and 0 when the score did not parse."""
    if parsed.value is None:
        return 0.0
    return 1.0 - (float(target) - parsed.value) ** 2
