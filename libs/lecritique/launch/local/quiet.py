"""Third-party chatter kept out of a run's output unless asked for (``--verbose``).

Hugging Face prints a "Writing model shards" bar on every save and a "LOAD REPORT ... MISSING"
table whenever a critic's value head is built on a policy backbone (the head is new by design).
Both are set through environment variables, so every service process a command starts inherits
the choice; nothing heavy is imported here.
"""

from __future__ import annotations

import os

VERBOSE_ENV = "LECRITIQUE_VERBOSE"
"""``1``: leave third-party logging and progress bars as their libraries set them."""

QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
"""What silences them (a variable the user set keeps its value)."""


def quiet_third_party(verbose: bool = False) -> None:
    """Silence Hugging Face's progress bars and load reports in this process and its children,
    unless ``verbose`` (or ``LECRITIQUE_VERBOSE=1``); call before transformers is imported."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
        for name, value in QUIET_ENV.items():
            if os.environ.get(name) == value:
                del os.environ[name]
        return
    if os.environ.get(VERBOSE_ENV) == "1":
        return
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
