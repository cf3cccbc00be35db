"""SIGTERM takes Ctrl-C's path inside ``terminate_as_interrupt``; both are held off inside
``signals_ignored``; the handlers before either come back after."""

import os
import signal

import pytest

from lecritique.launch.local.signals import signals_ignored, terminate_as_interrupt


def test_sigterm_raises_keyboard_interrupt_inside_and_the_old_handler_returns():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="signal 15"), terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_both_stop_signals_are_ignored_while_stopping():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with terminate_as_interrupt(), signals_ignored():
        assert {sig: signal.getsignal(sig) for sig in before} == dict.fromkeys(before, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a pending signal is delivered by now
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_sigterm_between_fork_and_registration_still_reaches_the_service(tmp_path, monkeypatch):
    # Found killing `lecritique study` under load: SIGTERM landed after the policy trainer was
    # forked but before the launcher listed it, so the stop that followed never reached it.
    import sys

    from lecritique.launch.local.launcher import LocalLauncher
    from lecritique.launch.local.processes import ManagedProcess

    launcher = LocalLauncher.__new__(LocalLauncher)  # stop() needs only its processes
    launcher.orchestrator, launcher.redis, launcher.services = None, None, []
    service = ManagedProcess(
        name="policy-trainer",
        command=[sys.executable, "-c", "import time; time.sleep(60)"],
        log_path=tmp_path / "policy-trainer.log",
    )
    start = ManagedProcess.start

    def start_then_terminated(self):
        start(self)
        os.kill(os.getpid(), signal.SIGTERM)  # the stop lands right after the fork

    monkeypatch.setattr(ManagedProcess, "start", start_then_terminated)
    try:
        with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
            launcher._start_and_keep(service)
        assert launcher.services == [service]
    finally:
        launcher.stop()
        if service.running:
            service.process.kill()
    assert service.process.returncode is not None
