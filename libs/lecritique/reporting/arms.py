"""Two arms of several runs each in ``lecritique compare``: paired differences with 95% intervals.

The runs of arm A and arm B are paired by seed where every run's spec.json records one and both
arms hold the same seeds, else in the order given (said in the text). For each figure the
difference A - B per pair, its mean, a 95% interval from Student's t on the per-pair differences
(n - 1 degrees of freedom, exact quantiles) and the two-sided p-value; with one pair there is no
interval. The figures are not corrected for being several: the text says how many were tested.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from lecritique.reporting.noise import Pairing, pair_runs, paired_difference_cell


class RunColumn(Protocol):
    """What the arms' comparison reads of a run (``lecritique.reporting.compare.RunColumn``)."""

    @property
    def label(self) -> str: ...
    @property
    def spec_name(self) -> str: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def final_reward(self) -> float: ...
    @property
    def eval_last(self) -> float: ...
    @property
    def seconds(self) -> float: ...


FIGURES: tuple[tuple[str, Callable[[RunColumn], float]], ...] = (
    ("final reward (last 25% of steps)", lambda c: c.final_reward),
    ("held-out success, last", lambda c: c.eval_last),
    ("wall time (s)", lambda c: c.seconds),
)
"""The figures the arms are compared on (A - B per pair)."""


def split_arms(
    columns: Sequence[RunColumn], arms: list[str]
) -> tuple[str, list[RunColumn], str, list[RunColumn]]:
    """(name A, runs A, name B, runs B) of exactly two arms, in the order the arms first appear."""
    names = list(dict.fromkeys(arms))
    if len(names) != 2:
        raise ValueError(f"compare takes two arms of runs, got {len(names)} ({', '.join(names)})")
    first = [c for c, arm in zip(columns, arms, strict=True) if arm == names[0]]
    second = [c for c, arm in zip(columns, arms, strict=True) if arm == names[1]]
    return names[0], first, names[1], second


def _described(name: str, runs: list[RunColumn]) -> str:
    """An arm's name: its label, or for the arms of ``--vs`` (just A and B) the spec name their runs share."""
    specs = {c.spec_name for c in runs}
    if name in ("A", "B") and len(specs) == 1 and "?" not in specs:
        return specs.pop()
    return name


def _interval(cell: dict[str, float]) -> str:
    if not math.isfinite(cell["t_low"]):
        return "n/a (one pair: no interval)"
    return f"[{cell['t_low']:+.3f}, {cell['t_high']:+.3f}]"


def _reading(name_a: str, name_b: str, cell: dict[str, float]) -> str:
    if not math.isfinite(cell["t_low"]):
        return "not tested"
    if cell["t_low"] > 0:
        return f"{name_a} higher"
    if cell["t_high"] < 0:
        return f"{name_b} higher"
    return "no difference shown"


def _pairing_text(pairing: Pairing, first: list[RunColumn], second: list[RunColumn]) -> str:
    if pairing.by_seed:
        seeds = ", ".join(str(first[a].seed) for a, _ in pairing.pairs)
        return f"paired by seed ({seeds})"
    pairs = "; ".join(f"{first[a].label} with {second[b].label}" for a, b in pairing.pairs)
    return f"paired in the order given, since {pairing.why_not_by_seed} ({pairs})"


def arms_text(columns: Sequence[RunColumn], arms: list[str]) -> str:
    """The markdown above the per-run table: the arms, how they were paired, the differences."""
    name_a, first, name_b, second = split_arms(columns, arms)
    name_a, name_b = _described(name_a, first), _described(name_b, second)
    pairing = pair_runs([c.seed for c in first], [c.seed for c in second])
    lines = [
        "| figure | mean of A − B | 95% interval (t) | p | pairs | reading |",
        "|---|---|---|---|---|---|",
    ]
    for figure, value in FIGURES:
        cell = paired_difference_cell([value(c) for c in first], [value(c) for c in second], pairing)
        mean = "n/a" if not math.isfinite(cell["mean"]) else f"{cell['mean']:+.3f}"
        p = "n/a" if not math.isfinite(cell["p"]) else f"{cell['p']:.3f}"
        left_out = f" ({int(cell['n_na'])} with an n/a left out)" if cell["n_na"] else ""
        lines.append(
            f"| {figure} | {mean} | {_interval(cell)} | {p} | {int(cell['n'])}{left_out} "
            f"| {_reading(name_a, name_b, cell)} |"
        )
    return (
        f"A = **{name_a}** ({len(first)} runs), B = **{name_b}** ({len(second)} runs), "
        f"{_pairing_text(pairing, first, second)}. Per pair, A − B; the interval is Student's t on the "
        f'per-pair differences (n − 1 degrees of freedom). "no difference shown": the interval holds 0, '
        f"which with {len(pairing.pairs)} pairs says the difference is smaller than the noise between "
        f"seeds can tell, not that there is none. {len(FIGURES)} figures are tested, each at 95% "
        "without a correction for the others.\n\n" + "\n".join(lines)
    )
