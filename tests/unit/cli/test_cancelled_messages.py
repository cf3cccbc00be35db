"""A cancelled run says so (issue 41), in-process: the orchestrator's signal handler logs the
signal at once and raises ``Cancelled``; ``lecritique run`` reports "cancelled after step N of M"
and exits 130 instead of printing "orchestrator exited with code 1"."""

from __future__ import annotations

import logging
import os
import signal

import pytest
import typer
from rich.console import Console

from lecritique.cli.orchestrate import Cancelled, _cancel_on_signal
from lecritique.cli.run import CANCELLED, ORCHESTRATOR_CANCELLED, _report_and_exit


def test_sigterm_is_logged_and_raises_cancelled_once(caplog):
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        _cancel_on_signal()
        with caplog.at_level(logging.WARNING), pytest.raises(Cancelled, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.1)  # let the handler run
        assert "received SIGTERM: cancelling the run" in caplog.text
        # A second signal while the clients close is ignored, not a second exception.
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("code", [CANCELLED, ORCHESTRATOR_CANCELLED])
def test_a_cancelled_run_is_reported_as_cancelled(tmp_path, code):
    console = Console(record=True, width=200)
    with pytest.raises(typer.Exit) as exited:
        _report_and_exit(tmp_path, "t", code, True, console, (3, 40))
    assert exited.value.exit_code == CANCELLED
    text = console.export_text()
    assert "cancelled after step 3 of 40" in text and "the same command resumes the run" in text
    assert "exited with code" not in text


def test_a_failed_run_still_names_its_exit_code_and_log(tmp_path):
    console = Console(record=True, width=200)
    with pytest.raises(typer.Exit) as exited:
        _report_and_exit(tmp_path, "t", 1, True, console, (3, 40))
    assert exited.value.exit_code == 1
    assert (
        f"orchestrator exited with code 1; see {tmp_path / 'logs' / 'orchestrator.log'}"
        in console.export_text()
    )
