"""The study's time, load and starting-policy parts of study.md; measures nothing (the figures come
from study.json: each run's ``timing`` and ``ended_by``, the study's ``accounting``).

- the header line of a file run on a loaded machine (mean foreign CPU over its runs above
  :data:`~lecritique.study.accounting.LOADED_CORES`);
- the starting policies: each build's steps, why it stopped and its held-out success;
- where the file's wall time went: builds, pretraining, the runs (inside their budgets, start-up,
  past the budget, teardown), the ceiling probe;
- per variant: seconds to the first policy step (the warm-up's cost), steps made within the
  budget, what ended the runs, whether it ran on emulated pools.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lecritique.study.accounting import LOADED_CORES


def _runs(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(variant, run) for variant, by_seed in document["runs"].items() for run in by_seed.values()]


def _timings(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [run["timing"] for _, run in _runs(document) if run.get("timing", {}).get("attempts")]


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def _median(values: Sequence[float]) -> float:
    finite = sorted(v for v in values if math.isfinite(v))
    if not finite:
        return float("nan")
    middle = len(finite) // 2
    return finite[middle] if len(finite) % 2 else (finite[middle - 1] + finite[middle]) / 2


def _f(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def load_banner(document: Mapping[str, Any]) -> str:
    """A warning line when the file's runs shared the machine with other work (else nothing)."""
    timings = _timings(document)
    if not timings:
        return ""
    weights = [float(t["wall_seconds"]) for t in timings]
    foreign = sum(float(t["foreign_cores"]) * w for t, w in zip(timings, weights, strict=True)) / max(
        sum(weights), 1e-9
    )
    worst = max(float(t["foreign_cores"]) for t in timings)
    if foreign <= LOADED_CORES and worst <= 2 * LOADED_CORES:
        return ""
    return (
        f"> **Run on a loaded machine**: other processes kept {foreign:.2f} cores busy on average while its runs "
        f"ran (at most {worst:.2f} in one run); arms compared at equal wall time got an unknown share of the "
        "cores. Read its differences with that in mind.\n\n"
    )


def starting_policies_table(document: Mapping[str, Any]) -> str:
    builds: Mapping[str, Any] = document.get("accounting", {}).get("starting_policies", {})
    if not builds:
        return ""
    lines = [
        "\nStarting policies (tiny builds, no wall-clock limit: a cut build is refused, never used; held-out "
        "success on the eval split, greedy and sampled at temperature 1):\n\n"
        "| policy | steps | stopped because | held-out success greedy | sampled | tasks |\n|---|---|---|---|---|---|\n"
    ]
    for name, build in sorted(builds.items()):
        greedy, sampled = build.get("greedy_success"), build.get("sampled_success")
        lines.append(
            f"| {name} | {build.get('steps')} | {build.get('stopped_because')} "
            f"| {greedy:.1%} | {sampled:.1%} | {build.get('eval_tasks')} |\n"
            if greedy is not None and sampled is not None
            else f"| {name} | {build.get('steps')} | {build.get('stopped_because')} | n/a | n/a | n/a |\n"
        )
    return "".join(lines)


def time_table(document: Mapping[str, Any]) -> str:
    """Where the file's wall time went, in minutes, and the machine's load while its runs ran."""
    timings = _timings(document)
    sections: Sequence[Mapping[str, Any]] = document.get("accounting", {}).get("sections", [])
    if not timings and not sections:
        return ""

    def by_kind(kind: str) -> float:
        return sum(float(s["seconds"]) for s in sections if s["kind"] == kind) / 60

    wall = sum(float(t["wall_seconds"]) for t in timings) / 60
    inside = (
        sum(
            min(float(t["orchestrator_seconds"]), float(t.get("budget_seconds") or math.inf)) for t in timings
        )
        / 60
    )
    start = sum(float(t["services_seconds"]) for t in timings) / 60
    past = sum(float(t["past_budget_seconds"]) for t in timings) / 60
    teardown = sum(float(t["teardown_seconds"]) for t in timings) / 60
    other = wall - inside - start - past - teardown
    built = [s for s in sections if s["kind"] == "build"]
    fresh = sum(1 for s in built if not s.get("cached"))
    total = by_kind("build") + by_kind("pretrain") + wall + by_kind("ceiling")
    rows = [
        (f"starting-policy builds ({fresh} built, {len(built) - fresh} from the cache)", by_kind("build")),
        ("critic pretraining", by_kind("pretrain")),
        (f"runs ({len(timings)}), wall time in all", wall),
        ("· inside their budgets (orchestrator's clock, up to orchestrator.max_seconds)", inside),
        ("· starting services and Redis", start),
        ("· past the budget (the step that spent it)", past),
        ("· orchestrator start-up and the final held-out evaluation", other),
        ("· teardown", teardown),
        ("ceiling probe", by_kind("ceiling")),
        ("total", total),
    ]
    loads = [float(t["load_1min_mean"]) for t in timings]
    foreign = [float(t["foreign_cores"]) for t in timings]
    cores = {int(t.get("cores", 0)) for t in timings if t.get("cores")}
    lines = [
        "\nTime (minutes; a resumed run counts every attempt). Outside the budgets: "
        f"{total - inside:.1f} of {total:.1f} minutes.\n\n| where | minutes |\n|---|---|\n",
        *(f"| {what} | {minutes:.1f} |\n" for what, minutes in rows),
        f"\nMachine load while the runs ran: other processes' CPU {_f(_mean(foreign), 2)} cores on average "
        f"(at most {_f(max(foreign, default=float('nan')), 2)} in one run); the 1-minute load average "
        f"{_f(_mean(loads), 2)} on average, which counts the study's own processes too"
        + (f" ({', '.join(str(c) for c in sorted(cores))} cores)" if cores else "")
        + ".\n",
    ]
    return "".join(lines)


def pace_table(document: Mapping[str, Any]) -> str:
    """Per variant: seconds to the first policy step, steps made, what ended the runs, the cores
    (nothing for studies recorded before runs were timed)."""
    if not _timings(document):
        return ""
    lines = [
        "\nPace (medians over seeds): seconds from the orchestrator's start to the end of the first policy "
        "step (the critic's warm-up, where the policy waits for it), policy steps made, and what ended each "
        "run (the wall-time budget, or the step cap):\n\n"
        "| variant | s to step 1 | steps made | ended by | cores |\n|---|---|---|---|---|\n"
    ]
    ended_by_cap = []
    for variant, by_seed in document["runs"].items():
        runs = list(by_seed.values())
        first = _median([float(r.get("timing", {}).get("first_step_seconds", float("nan"))) for r in runs])
        steps = _median([float(r["steps"]) for r in runs])
        ended = sorted({str(r.get("ended_by")) for r in runs})
        pools = {r.get("pools") for r in runs}
        cores = (
            "policy path on its pool" if pools == {True} else "every core" if pools == {False} else "mixed"
        )
        lines.append(f"| {variant} | {_f(first)} | {_f(steps, 0)} | {', '.join(ended)} | {cores} |\n")
        ended_by_cap += [f"{variant}/seed{s}" for s, r in by_seed.items() if r.get("ended_by") == "steps"]
    if ended_by_cap:
        lines.append(
            f"\n**Not at equal wall time**: {len(ended_by_cap)} runs reached the step cap before their budget "
            f"({', '.join(ended_by_cap[:8])}{', ...' if len(ended_by_cap) > 8 else ''}).\n"
        )
    return "".join(lines)
