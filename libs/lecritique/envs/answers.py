"""Answer extraction from completions: ``<answer>...</answer>`` tags and input hygiene.

Every scorer goes through :func:`clean_completion` first so that empty, huge or binary input is
handled in one place and never raises.
"""

from __future__ import annotations

import re

ANSWER_INSTRUCTION = "Put your final answer between <answer> and </answer>."
"""Appended to prompts of environments whose answers must be tagged."""

MAX_COMPLETION_CHARS = 65_536
"""Completions longer than this are rejected before parsing (reward 0)."""

_TAGGED = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def clean_completion(completion: object, max_chars: int = MAX_COMPLETION_CHARS) -> tuple[str | None, str]:
    """``(text, "")`` for usable text, or ``(None, diagnostic)`` for unusable input.

    Bytes are decoded as UTF-8 (invalid sequences are unusable); NUL bytes and other C0 control
    characters except tab/newline/carriage return mark binary junk.
    """
    if isinstance(completion, bytes | bytearray):
        try:
            completion = bytes(completion).decode("utf-8")
        except UnicodeDecodeError:
            return None, "completion is not valid UTF-8"
    if not isinstance(completion, str):
        return None, f"completion must be text, got {type(completion).__name__}"
    if not completion.strip():
        return None, "empty completion"
    if len(completion) > max_chars:
        return None, f"completion too long ({len(completion)} > {max_chars} characters)"
    if any(ord(char) < 32 and char not in "\t\n\r" for char in completion):
        return None, "completion contains binary control characters"
    return completion, ""


def extract_tagged_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>`` pair, or ``None``."""
    matches = _TAGGED.findall(text)
    if not matches:
        return None
    return str(matches[-1]).strip()


def extract_answer(completion: object, tags: bool) -> tuple[str | None, str]:
    """``(answer, "")`` from a completion, or ``(None, diagnostic)``.

    With ``tags`` the answer is the last ``<answer>`` span, otherwise the whole stripped text.
    """
    text, problem = clean_completion(completion)
    if text is None:
        return None, problem
    if not tags:
        return text.strip(), ""
    answer = extract_tagged_answer(text)
    return (answer, "") if answer is not None else (None, "no <answer> tag")


def tagged(answer: str) -> str:
    """``answer`` wrapped the way :func:`extract_tagged_answer` reads it."""
    return f"<answer>{answer}</answer>"


def short(text: str, limit: int = 40) -> str:
    """A bounded ``repr`` for diagnostics."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"...(+{len(text) - limit} chars)"
