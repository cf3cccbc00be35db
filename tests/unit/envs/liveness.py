"""A liveness guard for calls that must return (a verifier that could hang), shared by both tiers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def finishes(work: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``work()``'s value; fails (instead of hanging the suite) if it has not returned in ``seconds``.

    A liveness guard, not a speed assertion: the calls it wraps take well under a second.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"the call did not return within {seconds:g} s (the verifier hangs)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
