"""The arms a study's comparisons need (issue 39): which estimator each variant runs, the RLOO arm
beside every TETHER-vs-MEAN comparison, and the MEAN arm of the quick profile.

At rho = 0 TETHER's baseline is the leave-one-out mean of the group (Le Critique §4); with groups
of K its advantages are K / (K - 1) times MEAN's, and with an EMA of 0.95 rho stays small for many
steps. TETHER − MEAN therefore mixes the critic's effect with leave-one-out's; TETHER − RLOO is
the critic's alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_ESTIMATOR = "tether"
"""An experiment spec without an ``estimator`` section runs TETHER."""
MEAN_ARM: dict[str, Any] = {
    "name": "mean",
    "description": "group-mean baseline (GRPO without std normalisation), no critic: added by --quick",
    "overrides": {"estimator": {"name": "mean"}, "critic": None},
}
"""The MEAN arm the quick profile adds to a study that has none."""


def estimator_name(document: Mapping[str, Any]) -> str:
    """The estimator an experiment document (base merged with a variant's overrides) runs."""
    estimator = document.get("estimator")
    if isinstance(estimator, Mapping):
        return str(estimator.get("name", DEFAULT_ESTIMATOR))
    return DEFAULT_ESTIMATOR


def missing_rloo(comparisons: Sequence[tuple[str, str]], estimators: Mapping[str, str]) -> str | None:
    """Why ``comparisons`` cannot separate the critic from leave-one-out (None: they can): a
    TETHER-vs-MEAN comparison needs an RLOO variant and the TETHER variant compared with it."""
    declared = {frozenset(pair) for pair in comparisons}
    rloo = [name for name, estimator in estimators.items() if estimator == "rloo"]
    for a, b in comparisons:
        if {estimators.get(a), estimators.get(b)} != {"tether", "mean"}:
            continue
        tether = a if estimators.get(a) == "tether" else b
        if not rloo:
            return (
                f"comparisons: [{a}, {b}] compares TETHER with MEAN, whose difference mixes the critic's "
                "effect with the leave-one-out baseline TETHER is at rho = 0: add an rloo variant "
                f"(overrides: {{estimator: {{name: rloo}}, critic: null}}) and declare [{tether}, <its name>]"
            )
        if not any(frozenset((tether, other)) in declared for other in rloo):
            return (
                f"comparisons: [{a}, {b}] compares TETHER with MEAN: declare [{tether}, {rloo[0]}] too "
                "(the critic's effect apart from the leave-one-out baseline's)"
            )
    return None


def quick_comparisons(
    declared: Sequence[tuple[str, str]], kept: Sequence[str], mean: str
) -> list[tuple[str, str]]:
    """The quick profile's comparisons: the declared ones among the kept variants, then every kept
    variant against MEAN (which estimator to use), each pair once."""
    pairs = [(a, b) for a, b in declared if a in kept and b in kept]
    seen = {frozenset(pair) for pair in pairs}
    for name in kept:
        if name != mean and frozenset((name, mean)) not in seen:
            pairs.append((name, mean))
            seen.add(frozenset((name, mean)))
    return pairs
