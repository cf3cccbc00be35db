"""examples/studies/critic-pays*.yaml (issues 39 §5 and 45 item 6): what the study that decides it promises.

Equal wall time for every arm (the budget, never the step cap, ends a run), the value plane on its
own cores, a compute-matched MEAN on every core, the paper's Monte-Carlo PVF baseline beside MEAN,
RLOO and TETHER, 6 seeds over 3 starting policies, and the comparisons declared in the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lecritique.study.config import load_study_spec
from lecritique.study.run import plan_runs

STUDIES = Path(__file__).resolve().parents[3] / "examples" / "studies"
FILES = ["critic-pays.yaml", "critic-pays-arithmetic.yaml"]


@pytest.mark.parametrize("name", FILES)
def test_every_arm_has_the_same_wall_time_and_the_critic_its_own_cores(name: str) -> None:
    study = load_study_spec(STUDIES / name)
    runs = plan_runs(study, STUDIES)
    assert study.pools
    assert {r.spec.orchestrator.max_seconds for r in runs} == {100.0}
    # MEAN on every core made ~110 steps in 100 s on one core: a cap of 2,000 is never the end.
    assert all(r.spec.orchestrator.steps >= 2000 for r in runs)
    # No held-out evaluation inside the budget: an arm that steps faster must not pay more
    # evaluations out of it; the initial one comes before its clock starts, the final one after it.
    assert all(r.spec.orchestrator.eval_every > r.spec.orchestrator.steps for r in runs)
    assert len(study.seeds) >= 6 and len({r.policy_seed for r in runs}) >= 3
    estimators = {r.variant: r.spec.estimator.name for r in runs}
    assert {"mean", "rloo", "tether", "value"} <= set(estimators.values())
    tether = [variant for variant, estimator in estimators.items() if estimator == "tether"]
    assert all(
        r.spec.critic is not None and r.spec.critic.updates_per_step == 0 for r in runs if r.variant in tether
    ), "TETHER over an asynchronous critic"
    assert all(r.spec.critic.warmup == "auto" for r in runs if r.variant in tether), "no blocking warm-up"
    matched = {r.variant for r in runs if not r.pools}
    assert matched == {"mean-matched"} and estimators["mean-matched"] == "mean"
    declared = {tuple(pair) for pair in study.comparisons or []}
    assert (study.reference, "mean") in declared and (study.reference, "rloo") in declared
    assert (study.reference, "mean-matched") in declared and ("value-pvf", "mean") in declared
    for variant in tether:
        assert ((variant, "mean") in declared) == ((variant, "rloo") in declared), variant


def test_the_hard_to_infer_task_compares_the_pvf_with_the_vf() -> None:
    study = load_study_spec(STUDIES / "critic-pays-arithmetic.yaml")
    assert ("tether-pvf-async", "tether-vf-async") in {tuple(pair) for pair in study.comparisons or []}
