"""examples/studies/critic-pays*.yaml (issue 39 §5): what the study that decides it promises.

Equal wall time for every arm, the value plane on its own cores, at least 9 seeds over 3 starting
policies, MEAN and RLOO beside every TETHER arm, and the comparisons declared in the file.
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
    assert all(r.spec.orchestrator.steps >= 120 for r in runs)
    assert len(study.seeds) >= 9 and len({r.policy_seed for r in runs}) >= 3
    estimators = {r.variant: r.spec.estimator.name for r in runs}
    assert {"mean", "rloo"} <= set(estimators.values())
    tether = [variant for variant, estimator in estimators.items() if estimator == "tether"]
    assert tether and all(
        r.spec.critic is not None and r.spec.critic.updates_per_step == 0 for r in runs if r.variant in tether
    ), "TETHER over an asynchronous critic"
    declared = {tuple(pair) for pair in study.comparisons or []}
    assert (study.reference, "mean") in declared and (study.reference, "rloo") in declared
    for variant in tether:
        assert ((variant, "mean") in declared) == ((variant, "rloo") in declared), variant


def test_the_hard_to_infer_task_compares_the_pvf_with_the_vf() -> None:
    study = load_study_spec(STUDIES / "critic-pays-arithmetic.yaml")
    assert ("tether-pvf-async", "tether-vf-async") in {tuple(pair) for pair in study.comparisons or []}
