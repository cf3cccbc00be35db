"""``LocalLauncher.stop`` signals every service before it waits for any: each drains on its own
(about a second for a real service), so stopping them one after another would add those up."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lecritique.launch.local.launcher import LocalLauncher
from lecritique.launch.local.processes import ManagedProcess

# Records when SIGTERM arrived, then takes a while to drain, like a server's graceful stop.
DRAINING_SERVICE = """
import signal, sys, time
from pathlib import Path
record = Path(sys.argv[1])
def drain(signum, frame):
    record.write_text(f"{time.time()}\\n")
    time.sleep(0.5)
    with record.open("a") as out:
        out.write(f"{time.time()}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, drain)
Path(sys.argv[2]).touch()
while True:
    time.sleep(0.05)
"""


def _wait_until_ready(tmp_path: Path, names: list[str]) -> None:
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"{name}.ready").exists() for name in names):
        assert time.monotonic() < deadline, "the services did not start"
        time.sleep(0.05)


def _service(tmp_path: Path, name: str) -> ManagedProcess:
    process = ManagedProcess(
        name=name,
        command=[
            sys.executable,
            "-c",
            DRAINING_SERVICE,
            str(tmp_path / f"{name}.times"),
            str(tmp_path / f"{name}.ready"),
        ],
        log_path=tmp_path / f"{name}.log",
    )
    process.start()
    return process


def test_every_service_is_signalled_before_the_launcher_waits_for_any(tmp_path: Path) -> None:
    names = ["environment", "policy-trainer", "value-trainer", "rollout-0"]
    launcher = LocalLauncher.__new__(LocalLauncher)  # stop() needs only its processes
    launcher.orchestrator, launcher.redis = None, None
    launcher.services = [_service(tmp_path, name) for name in names]
    _wait_until_ready(tmp_path, names)
    processes = list(launcher.services)
    launcher.stop()
    assert all(process.process is not None and process.process.returncode == 0 for process in processes)
    times = {
        name: [float(line) for line in (tmp_path / f"{name}.times").read_text().split()] for name in names
    }
    # Every SIGTERM arrived before the first service finished draining.
    assert max(received for received, _ in times.values()) < min(drained for _, drained in times.values()), (
        times
    )


def test_a_service_is_signalled_once_per_start(tmp_path: Path) -> None:
    process = _service(tmp_path, "trainer")
    _wait_until_ready(tmp_path, ["trainer"])
    process.signal_stop()
    assert process.stop_signalled
    assert process.stop(grace=30) == 0
    process.start()
    assert not process.stop_signalled, "a restarted process can be stopped again"
    process.stop(grace=30)
