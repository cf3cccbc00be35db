"""The study's own CPU includes the services it started and waited for (issue 45 item 1): a reaped
child's CPU time is the study's, not another process's."""

from __future__ import annotations

import subprocess
import sys

from lecritique.study.accounting import cpu_snapshot

BURN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"


def test_a_reaped_child_s_cpu_is_the_study_s_own():
    before = cpu_snapshot()
    subprocess.run([sys.executable, "-c", BURN], check=True)
    after = cpu_snapshot()
    assert after.own - before.own >= 0.5, "the child's CPU seconds count once it is waited for"
    assert after.machine - before.machine >= 0.5
