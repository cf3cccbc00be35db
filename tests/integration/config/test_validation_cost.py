"""Validating a spec costs no more for large numbers than for small ones (issue #46, item 4).

The API validates every submitted spec in its own process, so nothing in validation may loop over a
number the tenant chose: ``critic.replay.max_reuse: 1e9`` with ``critic.batch_size: 1`` made the
replay budget count to ~1.3e11 one at a time (:func:`lecritique.replay.budget.update_budget`, now
closed form); ``estimator.buckets: 10**9`` allocated 11 GB (now at most 1024). This sweep takes
shipped specs of every environment and critic kind, sets each number of the validated spec in turn
to 10^9 and to 2^31 - 1, and validates it again, in a child process whose timer interrupts a
validation after :data:`SLOWEST_SECONDS` and whose address space is capped: a number that makes
validation loop or allocate fails the test instead of hanging it. The bound is generous (a
validation takes milliseconds).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SPECS = [
    "examples/sudoku-mini/tether-pvf.yaml",
    "examples/critics/sudoku-mini-generative.yaml",
    "examples/critics/sudoku-mini-frozen-llm.yaml",
    "examples/babyai-text/lvrl.yaml",
    "examples/codeio/pvf.yaml",
    "examples/reasoning-gym/tether-pvf.yaml",
    "examples/countdown/gae.yaml",
    "examples/arithmetic/evpo.yaml",
]
SLOWEST_SECONDS = 10.0
"""A validation that takes longer is a loop over the number (one takes milliseconds)."""
SWEEP_SECONDS = 900
"""The whole sweep's watchdog (it takes well under a minute on an idle machine)."""

CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys, time
    from pydantic import ValidationError
    from lecritique.config.experiment import ExperimentSpec, SpecValueError, load_spec

    LIMIT_SECONDS, MEMORY = float(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    class TooSlow(Exception):
        pass

    def interrupt(signum, frame):
        raise TooSlow()

    signal.signal(signal.SIGALRM, interrupt)

    def leaves(value, path=()):
        if isinstance(value, dict):
            for key, item in value.items():
                yield from leaves(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from leaves(item, (*path, index))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path

    def replaced(data, path, number):
        data = json.loads(json.dumps(data))
        here = data
        for part in path[:-1]:
            here = here[part]
        here[path[-1]] = number
        return data

    count, failures = 0, []
    for name in sys.argv[3:]:
        base = load_spec(name).model_dump(mode="json")
        for path in leaves(base):
            for number in (10**9, 2**31 - 1):
                count += 1
                field = ".".join(map(str, path))
                started = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, LIMIT_SECONDS)
                try:
                    ExperimentSpec.model_validate(replaced(base, path, number))
                except (ValidationError, SpecValueError, ValueError):
                    pass
                except TooSlow:
                    failures.append(f"{name}: {field} = {number} still validating after {LIMIT_SECONDS:g} s")
                except MemoryError:
                    failures.append(f"{name}: {field} = {number} needs more than {MEMORY >> 30} GiB to validate")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps({"count": count, "failures": failures}))
    """
)
MEMORY_BYTES = 4 << 30
"""Address space of the sweep's process: a validation that allocates in proportion to a number
(``estimator.buckets: 10**9`` took 11 GB before it was bounded) fails here instead of taking the machine's memory."""


def test_no_number_in_a_spec_makes_validation_loop() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(SLOWEST_SECONDS), str(MEMORY_BYTES), *SPECS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SWEEP_SECONDS,
        env={"PYTHONPATH": f"{ROOT / 'libs'}:{ROOT}", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["count"] > 500, report  # every number of eight specs, twice
    assert report["failures"] == [], "\n".join(report["failures"])
