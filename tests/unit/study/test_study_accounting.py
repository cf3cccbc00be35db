"""A study accounts for its own time and for the machine's load (issue 45 item 1)."""

from __future__ import annotations

from pathlib import Path

from lecritique.study.accounting import (
    CpuSnapshot,
    foreign_cores,
    record_section,
    run_account,
    run_timings,
    study_sections,
    timed_run,
)
from lecritique.study.time_table import load_banner, pace_table, time_table


def test_foreign_cores_is_the_machine_s_cpu_less_the_study_s_own_over_wall_time():
    before = CpuSnapshot(machine=100.0, own=10.0, wall=0.0)
    assert foreign_cores(before, CpuSnapshot(machine=130.0, own=20.0, wall=10.0)) == 2.0
    # Tick granularity can make own CPU exceed the machine's by a little: never negative.
    assert foreign_cores(before, CpuSnapshot(machine=109.0, own=20.0, wall=10.0)) == 0.0
    assert foreign_cores(before, before) == 0.0


def test_a_run_s_attempts_are_recorded_and_summed(tmp_path: Path):
    for services in (2.0, 3.0):
        with timed_run(tmp_path) as timing:
            timing.services_seconds, timing.teardown_seconds = services, 1.0
    attempts = run_timings(tmp_path)
    assert [a["services_seconds"] for a in attempts] == [2.0, 3.0]
    assert all(a["load_1min"] and a["cores"] >= 1 and a["wall_seconds"] >= 0 for a in attempts)
    rows = [{"step": 0, "seconds": 4.0}, {"step": 1, "seconds": 9.5}, {"step": 60, "seconds": 104.0}]
    account = run_account(attempts, rows, 100.0)
    assert account["services_seconds"] == 5.0 and account["teardown_seconds"] == 2.0
    assert account["first_step_seconds"] == 9.5, "the step-0 evaluation row is not a policy step"
    assert account["past_budget_seconds"] == 4.0 and account["attempts"] == 2


def _document(foreign: float, ended: str = "wall budget") -> dict:
    timing = {
        "wall_seconds": 120.0,
        "services_seconds": 8.0,
        "teardown_seconds": 2.0,
        "orchestrator_seconds": 103.0,
        "past_budget_seconds": 3.0,
        "first_step_seconds": 6.0,
        "foreign_cores": foreign,
        "load_1min_mean": 1.9,
        "load_1min_max": 2.4,
        "attempts": 1,
        "budget_seconds": 100.0,
        "cores": 2,
    }
    run = {"steps": 110, "ended_by": ended, "pools": True, "timing": timing}
    return {
        "runs": {"mean": {"0": run, "1": {**run, "steps": 100}}},
        "accounting": {"sections": [{"kind": "build", "what": "p", "seconds": 240.0, "cached": False}]},
    }


def test_study_md_says_where_the_time_went_and_whether_the_machine_was_loaded():
    quiet = _document(foreign=0.05)
    assert load_banner(quiet) == ""
    table = time_table(quiet)
    assert "| starting-policy builds (1 built, 0 from the cache) | 4.0 |" in table
    assert "| runs (2), wall time in all | 4.0 |" in table
    assert "| · inside their budgets (orchestrator's clock, up to orchestrator.max_seconds) | 3.3 |" in table
    assert "Outside the budgets: 4.7 of 8.0 minutes." in table
    pace = pace_table(quiet)
    assert "| mean | 6.0 | 105 | wall budget | policy path on its pool |" in pace
    assert "Not at equal wall time" not in pace
    assert "Run on a loaded machine" in load_banner(_document(foreign=0.9))
    assert "**Not at equal wall time**: 2 runs reached the step cap" in pace_table(_document(0.0, "steps"))


def test_the_study_s_own_sections_accumulate(tmp_path: Path):
    record_section(tmp_path, "build", "starting policy sudoku-mini seed 0", 200.04, cached=False)
    record_section(tmp_path, "ceiling", "the ceiling probe", 61.0)
    assert [(s["kind"], s["seconds"]) for s in study_sections(tmp_path)] == [
        ("build", 200.0),
        ("ceiling", 61.0),
    ]
