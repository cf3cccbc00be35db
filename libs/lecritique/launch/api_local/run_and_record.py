"""Run one local experiment (``lecritique run``) and record how it ended.

    python -m lecritique.launch.api_local.run_and_record --result FILE -- python -m lecritique run SPEC --out DIR

The API's local launcher starts this in its own session, so the run outlives an API restart. On
the first SIGTERM it passes SIGINT to ``lecritique run`` (which then stops every service it
started) and waits for it; further SIGTERMs are ignored. Either way it writes ``{"returncode", "cancelled"}`` to FILE, atomically, which is
how the API learns the outcome even when it was not the process's parent any more.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType


def write_result(path: Path, returncode: int, cancelled: bool) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"returncode": returncode, "cancelled": cancelled}))
    os.replace(temporary, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--result", type=Path, required=True, help="Where to write the outcome (JSON).")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="The command to run, after '--'.")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after '--'")
    cancelled = False
    child: subprocess.Popen[bytes] | None = None
    interrupted = False

    def interrupt_child() -> None:
        nonlocal interrupted
        # `lecritique run` treats SIGINT as Ctrl-C: it stops its services before exiting.
        if child is not None and not interrupted and child.poll() is None:
            interrupted = True
            child.send_signal(signal.SIGINT)

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal cancelled
        # Once only: a second Ctrl-C would interrupt `lecritique run` while it stops its
        # services and leave them running. Escalation is the API's (SIGKILL after a grace period).
        cancelled = True
        interrupt_child()

    # Handlers before the child exists: a SIGTERM that arrives while it starts must not kill the
    # supervisor with the default action (the run would go on unsupervised, with no result).
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    child = subprocess.Popen(command)
    if cancelled:  # asked to stop while the child was being started
        interrupt_child()
    returncode = child.wait()
    write_result(args.result, returncode, cancelled)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
