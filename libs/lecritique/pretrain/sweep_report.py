"""What ``lecritique critic sweep`` writes: the table of held-out EV per setting, the winner and its
margin, and generated blocks in a hand-written document (``docs/critics.md``).

A document holds, per sweep, a block between :func:`begin` and :func:`end` markers, rendered by
:func:`render` from the sweep's document in the JSON file beside it (``docs/critic-sweep.json``:
``{sweep name: sweep document}``); ``lecritique critic sweep ... --doc docs/critics.md --name N``
writes both, and a test regenerates every block from the committed JSON.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

DATA_NAME = "critic-sweep.json"
"""The JSON file beside the document that its sweep blocks are rendered from."""


def _mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def by_setting(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Per setting: its results over seeds, the mean held-out EV at the budget and the best over the
    longer one; ordered best first by the budget's mean over the seeds every setting has (a setting
    run on more seeds is not ranked by a different sample)."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    settings: dict[str, dict[str, Any]] = {}
    for result in document["results"]:
        key = json.dumps(result["setting"], sort_keys=True)
        grouped[key].append(result)
        settings[key] = result["setting"]
    common = set.intersection(*({r["seed"] for r in results} for results in grouped.values()))
    rows = []
    for key, results in grouped.items():
        results = sorted(results, key=lambda r: r["seed"])
        rows.append(
            {
                "setting": settings[key],
                "results": results,
                "budget_ev": _mean([r["budget_ev"] for r in results]),
                "rank_ev": _mean([r["budget_ev"] for r in results if r["seed"] in common]),
                "budget_train_ev": _mean([r["budget_train_ev"] for r in results]),
                "best_ev": _mean([r["best_ev"] for r in results]),
            }
        )
    return sorted(rows, key=lambda r: -r["rank_ev"] if np.isfinite(r["rank_ev"]) else np.inf)


def margin(document: dict[str, Any], *, most_seeds: bool = False) -> dict[str, Any] | None:
    """The winner at the budget, the runner-up, and the winner's lead per seed both ran (paired: same
    split, same rows); None with fewer than two settings. ``most_seeds``: among the settings run on the
    most seeds only, ranked by their mean over those seeds (a sweep re-runs its leaders on more seeds)."""
    rows = by_setting(document)
    if most_seeds:
        most = max(len(r["results"]) for r in rows)
        rows = sorted(
            (r for r in rows if len(r["results"]) == most),
            key=lambda r: -r["budget_ev"] if np.isfinite(r["budget_ev"]) else np.inf,
        )
    if len(rows) < 2:
        return None
    first, second = rows[0], rows[1]
    theirs = {r["seed"]: r["budget_ev"] for r in second["results"]}
    leads = [r["budget_ev"] - theirs[r["seed"]] for r in first["results"] if r["seed"] in theirs]
    return {
        "winner": first["setting"],
        "runner_up": second["setting"],
        "winner_ev": first["budget_ev"],
        "runner_up_ev": second["budget_ev"],
        "lead": _mean(leads),
        "leads": leads,
        "spread": float(np.std(leads, ddof=1)) if len(leads) > 1 else None,
        "seeds": len(leads),
        "candidates": len(rows),
    }


def _verdict(verdict: dict[str, Any], opening: str) -> str:
    spread = verdict["spread"]
    leads = ", ".join(f"{lead:+.3f}" for lead in verdict["leads"])
    return (
        f"{opening}: **{_setting(verdict['winner'])}** (held-out EV {_ev(verdict['winner_ev'])}), "
        f"ahead of {_setting(verdict['runner_up'])} ({_ev(verdict['runner_up_ev'])}) by "
        f"{verdict['lead']:+.3f} (per seed {leads}"
        + (f"; s.d. {spread:.3f})." if spread is not None else "; one seed, no spread).")
    )


def _value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _ev(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else "n/a"


def _setting(setting: dict[str, Any]) -> str:
    return ", ".join(f"{path} {_value(value)}" for path, value in sorted(setting.items()))


def _pushes(document: dict[str, Any]) -> str:
    every = document.get("updates_per_push")
    return (
        "pushed when the replay cannot feed an update"
        if every is None
        else f"one push every {every:g} updates"
    )


def render(document: dict[str, Any]) -> str:
    """The sweep's table (best first) and its verdict line, as markdown."""
    rows = by_setting(document)
    paths = sorted(document["grid"])  # the order the JSON beside the doc keeps (sort_keys)
    seeds = document["seeds"]
    long = document.get("long_updates")
    header = [
        *paths,
        *(f"held-out EV @{document['updates']}, seed {s}" for s in seeds),
        f"mean @{document['updates']}",
        f"train EV @{document['updates']}",
    ]
    if long:
        header += [f"best held-out EV ≤{long} (mean)", "at updates (per seed)"]
    lines = [
        f"Policy {Path(document['policy']).name} (tiny build seed {document['policy_seed']}, mean return "
        f"{document['mean_return']:.3f}), context `{document['context']}`, {document['trajectories']} episodes "
        f"({document['results'][0]['train_rows']} train / {document['results'][0]['held_out_rows']} held-out rows, "
        f"split by task); budget {document['updates']} updates of {document['batch_size']} rows, each row sampled at "
        f"most {document['max_reuse']} times (replay capacity {document['capacity']}, {document['fresh_per_push']} "
        f"fresh rows a push, {_pushes(document)}), target lambda {document['lambda_target']:g}; seeds {', '.join(map(str, seeds))} "
        "(split, head and sampling order).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        per_seed = {r["seed"]: r for r in row["results"]}
        cells = [_value(row["setting"][p]) for p in paths]
        cells += [_ev(per_seed[s]["budget_ev"]) if s in per_seed else "-" for s in seeds]
        cells += [_ev(row["budget_ev"]), _ev(row["budget_train_ev"])]
        if long:
            cells += [_ev(row["best_ev"]), ", ".join(str(r["best_at"]) for r in row["results"])]
        lines.append("| " + " | ".join(cells) + " |")
    verdict = margin(document)
    if verdict is not None:
        lines += ["", _verdict(verdict, "Best at the budget")]
    leaders = margin(document, most_seeds=True)
    if leaders is not None and leaders["seeds"] > (verdict or {}).get("seeds", 0):
        lines += [
            "",
            _verdict(
                leaders,
                f"Among the {leaders['candidates']} settings run on {leaders['seeds']} seeds, best by their mean",
            ),
        ]
    return "\n".join(lines) + "\n"


def begin(name: str, data: str) -> str:
    return f"<!-- generated by `lecritique critic sweep`: {name} (edit {data}'s data, not this block) -->"


def end(name: str) -> str:
    return f"<!-- end of generated sweep: {name} -->"


def splice(text: str, name: str, block: str, data: str) -> str:
    """``text`` with sweep ``name``'s block replaced by ``block`` (appended at the end if absent)."""
    whole = f"{begin(name, data)}\n{block.rstrip()}\n{end(name)}"
    opening = re.escape(f"<!-- generated by `lecritique critic sweep`: {name} (") + r"[^\n]*? -->"
    pattern = re.compile(opening + r".*?" + re.escape(end(name)), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: whole, text, count=1)
    return text.rstrip("\n") + "\n\n" + whole + "\n"


def publish(document: dict[str, Any], doc: Path, name: str) -> None:
    """Store ``document`` under ``name`` in the JSON beside ``doc`` and rewrite its block in ``doc``."""
    data_path = doc.with_name(DATA_NAME)
    documents = json.loads(data_path.read_text()) if data_path.is_file() else {}
    documents[name] = document
    data_path.write_text(json.dumps(documents, indent=1, sort_keys=True) + "\n")
    doc.write_text(regenerate(doc))


def regenerate(doc: Path) -> str:
    """The document with every sweep block rendered again from the JSON beside it."""
    data_path = doc.with_name(DATA_NAME)
    text = doc.read_text()
    for name, document in json.loads(data_path.read_text()).items():
        text = splice(text, name, render(document), f"{doc.parent.name}/{DATA_NAME}")
    return text
