"""The study's method (issue 39): exact t quantiles, Holm over every test a file declares, n/a seeds
counted, the final quarter of the steps, ev_mse / ceiling as a declared comparison with a
standard error by episode, an RLOO arm wherever TETHER meets MEAN, starting policies per seed,
runs copied between files refused, a MEAN arm in the quick profile."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from lecritique.config import SpecError
from lecritique.study.config import StudySpec, apply_quick, load_study_spec, plan_runs
from lecritique.study.report import render_tables
from lecritique.study.summary import aggregate, paired_difference, run_summary, t975
from tests.unit.study.test_study_docs import bucket, document
from tests.unit.study.test_study_plan import study
from tests.unit.study.test_study_summary import rows

STUDIES = Path(__file__).parents[3] / "examples" / "studies"


def test_t_quantiles_are_exact_at_every_degree_of_freedom():
    # Student t 0.975 quantiles to 10 digits (any statistics table; scipy.stats.t.ppf).
    for df, quantile in ((1, 12.7062047362), (4, 2.7764451052), (16, 2.1199052992), (30, 2.0422724563)):
        assert math.isclose(t975(df), quantile, abs_tol=1e-8), df
    assert math.isclose(t975(1000), 1.9623390808, abs_tol=1e-8)


def _runs(shift: dict[str, float], seeds: int = 5) -> dict[str, dict[int, dict]]:
    return {
        name: {
            seed: run_summary(
                rows([0.3 + delta * (1 + 0.1 * seed) + 0.01 * seed] * 4, ev=[0.1 + delta] * 4), 2
            )
            for seed in range(seeds)
        }
        for name, delta in shift.items()
    }


def test_holm_runs_over_every_test_the_file_declares():
    summary = aggregate(
        _runs({"a": 0.05, "b": 0.0, "c": 0.02}), [("a", "b"), ("c", "b")], bootstrap_samples=200
    )
    cells = [cell for figures in summary["differences"].values() for cell in figures.values()]
    finite = sorted(c["p"] for c in cells if math.isfinite(c["p"]))
    assert summary["holm_tests"] == len(finite) == 4  # 2 comparisons x (final reward, ev_var)
    smallest = min(cells, key=lambda c: c["p"] if math.isfinite(c["p"]) else 2)
    assert math.isclose(smallest["p_holm"], min(1.0, 4 * finite[0]))
    tables = render_tables(document(seeds=(0, 1, 2)))
    assert "Holm over all 3 tests this study declares" in tables  # 1 comparison x 3 figures


def test_seeds_whose_value_is_na_are_counted_and_shown():
    cell = paired_difference([0.1, float("nan"), 0.2, 0.3, 0.25], samples=200)
    assert (cell["n"], cell["n_na"]) == (4, 1)
    doc = document(seeds=(0, 1, 2))
    doc["runs"]["vf"]["2"]["figures"]["final_eval_success"] = float("nan")
    tables = render_tables(doc)
    assert "| vf vs pvf | final held-out success |" in tables
    line = next(t for t in tables.splitlines() if t.startswith("| vf vs pvf | final held-out success |"))
    assert line.endswith("| 2 of 3, 1 n/a |"), line
    variant = next(t for t in tables.splitlines() if t.startswith("| vf |"))
    assert "(2 of 3, 1 n/a)" in variant, variant


def test_final_reward_is_the_last_quarter_of_the_steps_and_the_table_says_so():
    spec = StudySpec.model_validate({**document()["study"]})
    assert spec.final_fraction == 0.25 and spec.final_window is None
    assert spec.final_steps(40) == 10 and spec.final_steps(3) == 1
    assert "final reward (last 25% of steps)" in render_tables(document())
    legacy = {**document()["study"], "final_window": 20}
    assert "final reward (last 20 steps)" in render_tables({**document(), "study": legacy})


def _states(episodes: int, per_episode: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    states = []
    for episode in range(episodes):
        p = rng.uniform(0.1, 0.9)
        rewards = (rng.random(8) < p).astype(float).tolist()
        value = p + rng.normal(0, 0.15)
        states += [{"episode": episode, "mc_rewards": rewards, "critic_values": {"pvf": value}}] * per_episode
    return states


def test_the_ratio_over_the_ceiling_has_a_standard_error_by_episode():
    from lecritique.study.ceiling_probe import ratio_se

    alone = ratio_se(_states(60, 1), "pvf", samples=400)
    # Five copies of each episode's state carry no more information: resampled by episode, the
    # standard error stays that of the 60 episodes (by state it would shrink by sqrt(5)).
    copied = ratio_se(_states(60, 5), "pvf", samples=400)
    assert 0.02 < alone < 0.5 and math.isclose(copied, alone, rel_tol=0.25), (alone, copied)
    assert math.isnan(ratio_se(_states(1, 3), "pvf", samples=50)), "one episode: no s.e."


def _probe(fraction: float, se: float = 0.03) -> dict:
    return {"buckets": [bucket(0.5, 0.02, 0.5 * fraction)], "critic_version": 7, "ratio_se": se}


def test_ev_mse_over_the_ceiling_is_a_declared_comparison_with_its_standard_error():
    doc = document(seeds=(0, 1, 2))
    doc["study"]["metrics"] = ["final_reward", "ev_mse_over_ceiling"]
    doc["ceiling"] = {
        f"{v}/seed{s}": _probe(f + 0.01 * s) for v, f in (("pvf", 0.4), ("vf", 0.3)) for s in range(3)
    }
    tables = render_tables(doc)
    line = next(t for t in tables.splitlines() if t.startswith("| vf vs pvf | ev_mse / ceiling |"))
    assert "| -0.100 |" in line, line
    assert "Holm over all 2 tests this study declares" in tables
    assert "0.40 ± 0.03" in tables, "each probed seed's ratio with its s.e."
    with pytest.raises(ValueError, match="metrics"):
        StudySpec.model_validate({**doc["study"], "metrics": ["final_rewards"]})


RLOO = {"name": "rloo", "overrides": {"estimator": {"name": "rloo"}, "critic": None}}


def test_a_comparison_of_tether_with_mean_needs_an_rloo_arm_compared_with_tether():
    with pytest.raises(SpecError, match=r"\[tether, mean\].*rloo"):
        plan_runs(study(comparisons=[["tether", "mean"]]), Path("."))
    with_arm = study(variants=[*study().model_dump()["variants"], RLOO], comparisons=[["tether", "mean"]])
    with pytest.raises(SpecError, match=r"\[tether, rloo\]"):
        plan_runs(with_arm, Path("."))
    paired = study(
        variants=[*study().model_dump()["variants"], RLOO],
        comparisons=[["tether", "mean"], ["tether", "rloo"]],
    )
    assert len(plan_runs(paired, Path("."))) == 10


def test_every_seed_picks_its_starting_policy_three_builds_by_default():
    runs = plan_runs(study(seeds=[0, 1, 2, 3, 4]), Path("."))
    assert {r.seed: r.policy_seed for r in runs} == {0: 0, 1: 1, 2: 2, 3: 0, 4: 1}
    shared = plan_runs(study(seeds=[5, 6], policy_builds=1), Path("."))
    assert {r.policy_seed for r in shared} == {5}
    quick = plan_runs(apply_quick(study(seeds=[0, 1, 2])), Path("."), quick=True)
    assert {r.policy_seed for r in quick} == {0}
    with pytest.raises(ValueError, match="policy_builds: 4 starting policies for 3 seeds"):
        study(seeds=[0, 1, 2], policy_builds=4)


def test_a_pretrain_stage_is_pretrained_on_each_starting_policy(tmp_path):
    spec = study(
        seeds=[0, 1, 2, 3],
        pretrain=[{"name": "pvf"}],
        variants=[{"name": "pvf"}, {"name": "pre", "overrides": {"critic": {"model_path": "pretrained"}}}],
    )
    runs = {r.key: r.spec for r in plan_runs(spec, Path("."), out=tmp_path)}
    assert runs["pre/seed3"].critic.model_path == str(
        (tmp_path / "pretrain" / "pvf" / "policy-seed0" / "critic").resolve()
    )
    assert runs["pre/seed1"].critic.model_path == str(
        (tmp_path / "pretrain" / "pvf" / "policy-seed1" / "critic").resolve()
    )


def test_a_run_copied_from_another_study_is_refused(tmp_path):
    from lecritique.study.run import run_study

    spec = {
        **study().model_dump(mode="json"),
        "variants": [{"name": "pvf"}, {"name": "vf", "overrides": {"critic": {"context": "none"}}}],
    }
    spec["seeds"] = [0]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    for variant, name in (("pvf", "s-pvf-s0"), ("vf", "other-study-vf-s0")):
        folder = out / "runs" / variant / "seed0"
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(
            json.dumps({"step": 40, "reward_mean": 0.5, "seconds": 1.0}) + "\n"
        )
        (folder / "spec.json").write_text(json.dumps({"name": name}))
    with pytest.raises(SpecError, match=r"runs/vf/seed0 holds experiment 'other-study-vf-s0', not 's-vf-s0'"):
        run_study(path, out, report_only=True, ceiling=False)


def test_runs_shared_by_two_published_studies_are_said_to_be_one_observation():
    from lecritique.study.docs import shared_runs

    first = document(seeds=(0, 1))
    second = json.loads(json.dumps(first))
    second["study"]["name"] = "t"
    second["runs"]["pvf"]["1"]["series"]["reward_mean"]["value"] = [0.3, 0.4]
    second["runs"]["vf"]["0"]["series"]["value_explained_variance"]["value"] = [0.1, 0.2000001]  # a rerun
    note = shared_runs("t", {"s": first, "t": second})
    assert "pvf seed 0, vf seeds 0–1" in note and "`s`" in note and "one observation" in note
    assert shared_runs("s", {"s": first}) == ""


def test_the_quick_profile_has_a_mean_arm_to_say_which_estimator_to_use():
    no_mean = study(variants=[v for v in study().model_dump()["variants"] if v["name"] != "mean"])
    quick = apply_quick(no_mean, Path("."))
    names = [v.name for v in quick.variants]
    assert names == ["vf", "pvf", "mean"]
    assert {tuple(p) for p in quick.compared()} >= {("pvf", "mean"), ("vf", "mean")}
    runs = plan_runs(quick, Path("."), quick=True)
    mean = next(r.spec for r in runs if r.variant == "mean")
    assert mean.estimator.name == "mean" and mean.critic is None
    kept = apply_quick(study(quick={"variants": ["tether", "pvf"]}), Path("."))
    assert [v.name for v in kept.variants] == ["mean", "pvf", "tether"], "the study's own MEAN arm"


@pytest.mark.parametrize("path", sorted(STUDIES.glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_studies_follow_the_method(path):
    spec = load_study_spec(path)
    data = yaml.safe_load(path.read_text())
    assert "final_window" not in data, "final reward over the last 25% of the steps"
    runs = plan_runs(spec, path.parent)
    first = next(r for r in runs if r.seed == spec.seeds[0])
    if first.spec.orchestrator.eval_every is not None and first.spec.policy.tiny is not None:
        assert all(r.spec.orchestrator.eval_tasks >= 256 for r in runs)
    if first.spec.policy.tiny is not None:
        assert (
            spec.ceiling.states >= 480
            and spec.ceiling.tasks * spec.ceiling.group_size >= spec.ceiling.states / 2
        )
        assert len({r.policy_seed for r in runs}) >= min(3, len(spec.seeds))
