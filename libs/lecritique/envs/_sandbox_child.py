"""Entry point of the sandbox's child process: ``python -I -B -S _sandbox_child.py``.

The host (:mod:`lecritique.envs.sandbox`) writes one JSON job to stdin and reads the outcome
from a pipe; the work is done by the package next to this file (:mod:`lecritique.envs._sandbox`),
imported as the top-level ``_sandbox`` so that the child imports neither ``lecritique`` nor any
environment, only the standard library and pyseccomp.
"""

from __future__ import annotations

import json
import os
import sys


def _main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    # Started with -S: the interpreter's site-packages (pyseccomp, the allowed packages) by hand,
    # and the exit()/quit() builtins that code may call.
    sys.path.extend(job["site_packages"])
    import site

    site.setquit()
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path.insert(0, here)
    try:
        from _sandbox import child
    finally:
        sys.path.remove(here)  # the untrusted code must not import this checkout's modules
    child.main(job, checkout=here)


if __name__ == "__main__":
    _main()
