"""The oracle ceiling's part of study.md: each probed seed's critic EV / ceiling (shown only where
the ceiling is clearly above zero), its mean over a variant's seeds, and the per-position table
with its verdict (from the ceiling probes of study.json, :mod:`~lecritique.study.ceiling_probe`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from lecritique.critic_eval.ceiling import MIN_CEILING, Z95
from lecritique.study.summary import mean_std, t975


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def ratio_allowed(bucket: Mapping[str, Any]) -> bool:
    """A critic's EV / ceiling is shown only where the ceiling's 95% interval lies above MIN_CEILING."""
    ceiling, se = bucket.get("ceiling", float("nan")), bucket.get("ceiling_se", float("nan"))
    return bool(math.isfinite(ceiling) and math.isfinite(se) and ceiling - Z95 * se > MIN_CEILING)


def fraction_of(bucket: Mapping[str, Any]) -> tuple[float, str]:
    """(EV / ceiling, why n/a) of a flattened probe bucket (study.json rows of any age)."""
    ev = bucket.get("ev_mse", bucket.get("critic_ev", float("nan")))
    if not math.isfinite(bucket.get("ceiling", float("nan"))):
        return float("nan"), bucket.get("ceiling_note", "no ceiling")
    if not ratio_allowed(bucket):
        return float("nan"), "ceiling too small"
    return (
        (ev / bucket["ceiling"], "") if math.isfinite(ev) else (float("nan"), bucket.get("ev_note", "no EV"))
    )


def probe_fractions(ceiling: Mapping[str, Any], variant: str) -> dict[str, float]:
    """EV / ceiling (all positions) of every probed seed of ``variant``, and its 95% half-width."""
    values = []
    for key, result in ceiling.items():
        if key.split("/")[0] != variant:
            continue
        overall = next((b for b in result.get("buckets", []) if b["label"] == "all"), None)
        values.append(fraction_of(overall)[0] if overall else float("nan"))
    cell = mean_std(values)
    n = int(cell["n"])
    half = t975(n - 1) * cell["std"] / math.sqrt(n) if n > 1 else float("nan")
    return {**cell, "half": half, "probed": len(values)}


def seed_fraction(ceiling: Mapping[str, Any], variant: str, seed: int) -> float:
    """EV / ceiling (all positions) of one probed run; NaN when not probed or n/a."""
    result = ceiling.get(f"{variant}/seed{seed}", {})
    overall = next((b for b in result.get("buckets", []) if b["label"] == "all"), None)
    return fraction_of(overall)[0] if overall else float("nan")


def with_ceiling_figures(
    runs: Mapping[str, Mapping[int, Mapping[str, Any]]], ceiling: Mapping[str, Any]
) -> dict[str, dict[int, dict[str, Any]]]:
    """``runs`` (run summaries by variant and seed) with each run's ``ev_mse_over_ceiling`` figure
    from its ceiling probe (NaN where it was not probed or the ratio is n/a), for the comparisons."""
    return {
        variant: {
            seed: {
                **summary,
                "figures": {
                    **summary["figures"],
                    "ev_mse_over_ceiling": seed_fraction(ceiling, variant, int(seed)),
                },
            }
            for seed, summary in by_seed.items()
        }
        for variant, by_seed in runs.items()
    }


def _per_seed(values: list[str]) -> str:
    return " / ".join(values) if values else "n/a"


def ceiling_table(ceiling: Mapping[str, Any]) -> str:
    """The oracle-ceiling section of study.md from study.json's ``ceiling`` (empty without probes)."""
    if not ceiling:
        return ""
    by_variant: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for key, result in ceiling.items():
        by_variant.setdefault(key.split("/")[0], []).append((key.split("/")[1], result))
    lines = [
        "\nOracle ceiling (final policy and the critic version of the last step, held-out states at every response "
        "position; t = response tokens since the episode's first policy token; estimator "
        "lecritique.critic_eval.ceiling). Per probed seed: ceiling Var(E[R|s])/Var(R) ± bootstrap s.e. (by episode; "
        '"by state" marks probes measured before that fix, whose s.e. is too small), the critic\'s ev_mse (1 − MSE/Var(R) against '
        f"every continuation's return) and ev_mse / ceiling (n/a where the ceiling's 95% interval reaches {MIN_CEILING}; "
        "± its bootstrap s.e. by episode where the probe's states were kept). A ceiling below 0 is the "
        "estimator's noise, not the task's: Var(E[R|s]) is estimated unbiased, as the variance of the states' "
        "mean returns minus the continuations' within-state variance over K, which a small true value and few "
        "continuations can take below 0; read it as about 0 (its ratio is n/a):\n\n"
        "| variant | positions | seeds | states | ceiling ± s.e. | ev_mse | ev_mse / ceiling | mean ev_mse / ceiling |\n"
        "|---|---|---|---|---|---|---|---|\n"
    ]
    notes = []
    for variant, seeds in by_variant.items():
        notes += [
            f"{variant}/{seed}: {r['note']}" for seed, r in seeds if not r.get("buckets") and r.get("note")
        ]
        labels = [b["label"] for b in next((r["buckets"] for _, r in seeds if r.get("buckets")), [])]
        for label in labels:
            lines.append(_ceiling_row(variant, label, seeds))
    verdict = _ceiling_verdict(by_variant)
    missing = "".join(f"\nNo probe for {note}." for note in notes)
    stale = sorted(
        {r["note_version"] for seeds in by_variant.values() for _, r in seeds if r.get("note_version")}
    )
    caveat = "".join(f"\nProbed critic: {note}.\n" for note in stale)
    substituted = "".join(
        f"\nProbed for {variant}/{seed}: {r['critic_note']}."
        for variant, seeds in by_variant.items()
        for seed, r in seeds
        if r.get("buckets") and r.get("critic_note")
    )
    return (
        "".join(lines)
        + f"\nVerdict (all positions, mean over probed seeds): {verdict}.\n{missing}{substituted}{caveat}"
        + fit_table(by_variant)
    )


def fit_table(by_variant: Mapping[str, list[tuple[str, Mapping[str, Any]]]]) -> str:
    """Why each critic's error is what it is, against the probe's Monte-Carlo values (mean over
    probed seeds; empty for studies probed before the parts were recorded)."""
    rows = []
    for variant, seeds in by_variant.items():
        fits = [r["fit"] for _, r in seeds if r.get("fit", {}).get("states")]
        if not fits:
            continue

        def mean(key: str, fits: list[Mapping[str, float]] = fits) -> str:
            values = [f[key] for f in fits if math.isfinite(f[key])]
            return _fmt(float(np.mean(values))) if values else "n/a"

        shares = [f["bias"] ** 2 / f["value_mse"] for f in fits if f["value_mse"] > 0]
        share = _fmt(float(np.mean(shares)), 2) if shares else "n/a"
        rows.append(
            f"| {variant} | {len(fits)} | {mean('value_mse')} | {mean('bias')} | {share} | {mean('correlation')} | {mean('spread')} |\n"
        )
    if not rows:
        return ""
    return (
        "\nCritic fit against the probe's Monte-Carlo values m (held-out states, all positions; mean over probed "
        "seeds; lecritique.critic_eval.scores.fit_decomposition): value MSE = bias² + (sd(V) − r·sd(m))² + "
        "(1 − r²)·sd(m)², with bias = mean(V − m) and r = corr(V, m); r² is the most of Var(m) any rescaling "
        "of the critic's values could explain.\n\n"
        "| variant | seeds | value MSE | bias mean(V − m) | share of MSE from bias | corr(V, m) | sd(V) / sd(m) |\n"
        "|---|---|---|---|---|---|---|\n" + "".join(rows)
    )


def _ceiling_row(variant: str, label: str, seeds: list[tuple[str, Mapping[str, Any]]]) -> str:
    buckets = [
        (seed, next((b for b in r.get("buckets", []) if b["label"] == label), None)) for seed, r in seeds
    ]
    present = [(seed, b) for seed, b in buckets if b is not None]
    by = {b.get("se_resampled_by", "state") for _, b in present}
    ceilings = [f"{_fmt(b['ceiling'], 2)} ± {_fmt(b['ceiling_se'], 2)}" for _, b in present]
    evs = [_fmt(b.get("ev_mse", b.get("critic_ev", float("nan")))) for _, b in present]
    fractions = [fraction_of(b) for _, b in present]
    errors = {seed: r.get("ratio_se", float("nan")) for seed, r in seeds} if label == "all" else {}
    shown = [
        (_fmt(f, 2) + (f" ± {_fmt(errors[seed], 2)}" if math.isfinite(errors.get(seed, math.nan)) else ""))
        if math.isfinite(f)
        else f"n/a ({why})"
        for (seed, _), (f, why) in zip(present, fractions, strict=True)
    ]
    finite = [f for f, _ in fractions if math.isfinite(f)]
    mean = (
        _fmt(float(np.mean(finite)), 2)
        + ("" if len(finite) == len(fractions) else f" ({len(finite)} of {len(fractions)})")
        if finite
        else "n/a"
    )
    return (
        f"| {variant} | {label} | {_per_seed([s.removeprefix('seed') for s, _ in present])} | {_per_seed([str(b['states']) for _, b in present])} "
        f"| {_per_seed(ceilings)}{' (by state)' if by == {'state'} else ''} | {_per_seed(evs)} | {_per_seed(shown)} | {mean} |\n"
    )


def _ceiling_verdict(by_variant: Mapping[str, list[tuple[str, Mapping[str, Any]]]]) -> str:
    scored = []
    for variant, seeds in by_variant.items():
        overall = [b for _, r in seeds for b in r.get("buckets", []) if b["label"] == "all"]
        fractions = [f for f in (fraction_of(b)[0] for b in overall) if math.isfinite(f)]
        if fractions:
            ceiling = float(np.mean([b["ceiling"] for b in overall]))
            se = float(np.mean([b["ceiling_se"] for b in overall]))
            scored.append((float(np.mean(fractions)), variant, ceiling, se))
    if not scored:
        return "none: no probe has a ceiling clearly above 0"
    scored.sort(reverse=True)
    best, name, ceiling, se = scored[0]
    others = "; ".join(f"{n} {f:.2f}" for f, n, _, _ in scored[1:])
    head = "tie" if any(abs(f - best) < 0.005 for f, *_ in scored[1:]) else f"best: {name}"
    return f"{head}, {best:.2f} of the ceiling (ceiling {ceiling:.2f} ± {se:.2f} s.e.)" + (
        f"; {others}" if others else ""
    )
