"""User verifier functions for the dataset environment's ``python`` verifier (imported by entry point)."""

from __future__ import annotations

from typing import Any


def within_one(answer: str, reference: str, row: dict[str, Any]) -> tuple[float, str]:
    """Full credit for the exact number, half for one off; the row is passed as read."""
    try:
        distance = abs(int(answer) - int(reference))
    except ValueError:
        return 0.0, f"not an integer (row {row['id']})"
    return (1.0, "exact") if distance == 0 else (0.5, "one off") if distance == 1 else (0.0, "far off")


def broken(answer: str, reference: str, row: dict[str, Any]) -> float:
    raise RuntimeError("user code failed")


def not_a_reward(answer: str, reference: str, row: dict[str, Any]) -> str:
    return "yes"


NOT_CALLABLE = 3


def slow_exact(answer: str, reference: str, row: dict[str, Any]) -> float:
    """An honest scorer that takes its time (1.5 s): a time limit must not cut it short."""
    import time

    time.sleep(1.5)
    return float(answer.strip() == reference.strip())


def exits(answer: str, reference: str, row: dict[str, Any]) -> float:
    """A scorer whose process dies on the answer ``die`` (a crash in native code looks like this)."""
    import os

    if answer.strip() == "die":
        os._exit(3)
    return float(answer.strip() == reference.strip())


def always_one(answer: str, reference: str, row: dict[str, Any]) -> float:
    """A broken scorer that pays every answer: the audit must name a constant that wins."""
    return 1.0
