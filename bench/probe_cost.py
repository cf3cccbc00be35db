"""What the in-run critic probe (``critic_probe``) costs the policy loop: one small run without it and
one with it, alternating for ``--rounds`` rounds in one session (load from other processes hits both).

The run is the services tests' pipeline spec (4x4 Sudoku, 1-2 empty cells, 4 tasks x 4 episodes a
step, a VF) on the tests' quick tiny policy; the probe is ``every: 4, states: 16, continuations: 4``.
Reported per run: policy steps per minute over steps 2..N (step time plus probe time: the probe
runs in the policy loop) and over the whole run (start-up and critic warm-up included).

    python bench/probe_cost.py OUT [--steps 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "libs"), str(ROOT)]

from tests.integration.services.conftest import pipeline_spec, run_experiment  # noqa: E402
from tests.tiny_policies import quick_policy  # noqa: E402

PROBE = {"every": 4, "states": 16, "continuations": 4}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    policy = quick_policy()
    results: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    for round_index in range(args.rounds):
        for label in results:
            spec = pipeline_spec(policy, estimator={"name": "value"}, orchestrator={"steps": args.steps})
            if label == "with":
                spec["critic_probe"] = PROBE
            rows = run_experiment(spec, args.out / f"{label}-{round_index}")
            measured = rows[1:]
            busy = sum(r["step_seconds"] for r in measured) + sum(
                r.get("probe_seconds", 0.0) for r in measured
            )
            results[label].append(
                {
                    "steps_per_minute": 60 * len(measured) / busy,
                    "steps_per_minute_whole_run": 60 * len(rows) / rows[-1]["seconds"],
                    "probe_seconds": statistics.mean(
                        [r["probe_seconds"] for r in rows if "probe_seconds" in r] or [0.0]
                    ),
                }
            )
            print(label, round_index, json.dumps(results[label][-1]), flush=True)
    (args.out / "probe_cost.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
