"""How a foreground command that owns services treats SIGTERM and SIGINT.

By default SIGTERM (a scheduler's stop, ``kill``) ends the Python process at once and orphans
every service process it started; Ctrl-C instead raises ``KeyboardInterrupt``, which unwinds
into the ``finally`` that stops them. ``terminate_as_interrupt`` gives SIGTERM the Ctrl-C path.
While the services stop, a second signal would interrupt the stop half-way and leave the rest
running, so ``signals_ignored`` holds both off for that stretch. Between the fork of a service
and its registration with the launcher a stop signal would leave a process nobody stops, so
``signals_deferred`` delivers one only after such a step. ``lecritique run`` and ``lecritique
study`` share them.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _in_main_thread() -> bool:
    # signal.signal raises outside the main thread (a test or an API worker calling in).
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does; the previous handler returns after."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside (main thread only); the previous handlers return after."""
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """A SIGINT or SIGTERM arriving inside is held and delivered (to the previous handler) when
    the block ends, so that a step inside is done whole or not begun."""
    if not _in_main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])
