"""The study spec: variants merge into the base, seeds, the quick profile, errors naming the variant."""

from pathlib import Path

import pytest

from lecritique.config import SpecError
from lecritique.config.documents import merge_documents as merge
from lecritique.study.config import StudySpec, apply_quick, plan_runs

BASE = {
    "name": "base",
    "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
    "policy": {"tiny": "sudoku-mini"},
    "rollout": {"group_size": 4, "tasks_per_step": 8, "sampling": {"max_tokens": 8}},
    "estimator": {"name": "value"},
    "critic": {"context": "reference", "warmup_updates": 5},
    "orchestrator": {"steps": 40, "eval_every": 10},
}


def study(**changes):
    data = {
        "name": "s",
        "base": BASE,
        "reference": "pvf",
        "seeds": [0, 1],
        "variants": [
            {"name": "mean", "overrides": {"estimator": {"name": "mean"}, "critic": None}},
            {"name": "vf", "overrides": {"critic": {"context": "none"}}},
            {"name": "pvf"},
            {"name": "tether", "overrides": {"estimator": {"name": "tether", "ema_decay": 0.9}}},
        ],
        **changes,
    }
    return StudySpec.model_validate(data)


def test_merge_replaces_leaves_merges_mappings_and_null_removes():
    merged = merge({"a": {"b": 1, "c": 2}, "d": 3, "e": [1]}, {"a": {"c": 5}, "d": None, "e": [2]})
    assert merged == {"a": {"b": 1, "c": 5}, "e": [2]}


def test_every_variant_and_seed_is_one_validated_experiment_seed_major():
    runs = plan_runs(study(), Path("."))
    assert [r.key for r in runs] == [f"{v}/seed{s}" for s in (0, 1) for v in ("mean", "vf", "pvf", "tether")]
    by_key = {r.key: r.spec for r in runs}
    assert by_key["mean/seed1"].critic is None and by_key["mean/seed1"].estimator.name == "mean"
    assert by_key["vf/seed0"].critic.context == "none" and by_key["vf/seed0"].critic.warmup_updates == 5
    assert by_key["pvf/seed0"].critic.context == "reference"
    assert by_key["tether/seed1"].estimator.ema_decay == 0.9 and by_key["tether/seed1"].seed == 1
    assert by_key["tether/seed1"].name == "s-tether-s1"


def test_quick_profile_is_one_seed_two_variants_and_few_steps():
    quick = apply_quick(study())
    runs = plan_runs(quick, Path("."), quick=True)
    assert [r.key for r in runs] == ["mean/seed0", "pvf/seed0"], "the reference, the first other (MEAN here)"
    assert all(r.spec.orchestrator.steps == 3 and r.spec.rollout.tasks_per_step == 4 for r in runs)
    assert runs[1].spec.critic.warmup_updates == 2
    assert runs[0].spec.critic is None, "the quick profile must not give a critic-free variant a critic"


def test_a_quick_profile_without_the_reference_is_still_a_valid_study():
    # The report re-validates the study it ran: a quick profile that leaves the reference out
    # (quick.variants: [mean, tether]) must name one of the variants it keeps, and keep only the
    # comparisons among them.
    spec = study(quick={"variants": ["mean", "tether"]}, comparisons=[["mean", "tether"], ["vf", "pvf"]])
    quick = apply_quick(spec)
    again = StudySpec.model_validate(quick.model_dump())
    assert again.reference in {"mean", "tether"}
    assert again.comparisons == [("mean", "tether")]


def test_the_reference_must_be_a_variant():
    with pytest.raises(ValueError, match="reference 'nope'"):
        study(reference="nope")


def test_a_bad_override_is_reported_with_its_variant_and_seed():
    bad = study(
        variants=[
            {"name": "pvf"},
            {"name": "typo", "overrides": {"estimator": {"name": "tether", "ema_decy": 1}}},
        ]
    )
    with pytest.raises(SpecError, match="variant 'typo', seed 0"):
        plan_runs(bad, Path("."))


def test_a_base_spec_file_is_read_relative_to_the_study(tmp_path):
    import yaml

    (tmp_path / "base.yaml").write_text(yaml.safe_dump(BASE))
    runs = plan_runs(study(base="base.yaml", seeds=[3]), tmp_path)
    assert {r.spec.seed for r in runs} == {3} and len(runs) == 4


def test_the_shipped_studies_are_valid():
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    folder = REPO_ROOT / "examples" / "studies"
    names = sorted(p.name for p in folder.glob("*.yaml"))
    assert "arithmetic.yaml" in names and "sudoku-mini.yaml" in names
    for path in folder.glob("*.yaml"):
        spec = load_study_spec(path)
        runs = plan_runs(spec, folder)
        assert {r.variant for r in runs} == {v.name for v in spec.variants}
        plan_runs(apply_quick(spec), folder, quick=True)


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).parents[3] / "examples" / "studies").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_shipped_study_plans_valid_experiments(path: Path) -> None:
    from lecritique.study.config import load_study_spec

    study = load_study_spec(path)
    runs = plan_runs(study, path.parent)
    assert len(runs) == len(study.variants) * len(study.seeds)


def test_the_levers_study_declares_its_comparisons_and_budget_arms():
    """Study-level structure of examples/studies/critic-levers.yaml: the k = 0 and k = 2 arms for
    both critics, TETHER and MEAN, five seeds, the comparisons declared before running (each
    critic at equal budget, and each critic's k = 2 against its asynchronous k = 0)."""
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    study = load_study_spec(REPO_ROOT / "examples" / "studies" / "critic-levers.yaml")
    names = {v.name for v in study.variants}
    assert {"mean", "rloo", "tether-pvf"} | {f"{c}-k{k}" for c in ("vf", "pvf") for k in (0, 2)} == names
    compared = [list(p) for p in study.compared()]
    assert len(study.seeds) == 5 and ["tether-pvf", "mean"] in compared and ["tether-pvf", "rloo"] in compared
    assert all([f"pvf-k{k}", f"vf-k{k}"] in compared for k in (0, 2))
    assert ["pvf-k2", "pvf-k0"] in compared and ["vf-k2", "vf-k0"] in compared
    by_name = {r.variant: r.spec for r in plan_runs(study, REPO_ROOT / "examples" / "studies") if r.seed == 0}
    assert [by_name[f"pvf-k{k}"].critic.updates_per_step for k in (0, 2)] == [0, 2]
    assert by_name["mean"].critic is None


def test_the_k8_arms_are_a_file_of_their_own_on_the_levers_studys_base_and_seeds():
    """examples/studies/critic-levers-k8.yaml: the first file measured about 106 minutes with its
    k = 8 arms (over the 90-minute budget), so they are a second file whose experiments are the
    ones the first file would have run (same base, seeds, and k = 8 critic with reuse <= 8)."""
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    folder = REPO_ROOT / "examples" / "studies"
    study = load_study_spec(folder / "critic-levers-k8.yaml")
    levers = load_study_spec(folder / "critic-levers.yaml")
    assert study.seeds == levers.seeds and study.ceiling == levers.ceiling
    assert study.final_window == levers.final_window
    assert {v.name for v in study.variants} == {"vf-k8", "pvf-k8"}
    assert [list(p) for p in study.compared()] == [["pvf-k8", "vf-k8"]]
    by_name = {r.variant: r.spec for r in plan_runs(study, folder) if r.seed == 0}
    k2 = {r.variant: r.spec for r in plan_runs(levers, folder) if r.seed == 0}
    for critic in ("vf", "pvf"):
        k8_spec, k2_spec = by_name[f"{critic}-k8"], k2[f"{critic}-k2"]
        assert (k8_spec.critic.updates_per_step, k8_spec.critic.replay.max_reuse) == (8, 8)
        assert k8_spec.critic.context == k2_spec.critic.context
        # Everything but the budget (and the reuse it needs) is the first file's k = 2 arm.
        changed = k8_spec.model_copy(update={"critic": k2_spec.critic}).model_dump(exclude={"name"})
        assert changed == k2_spec.model_dump(exclude={"name"})


def test_the_capacity_study_varies_only_the_critics_size_start_and_pretraining(tmp_path):
    """examples/studies/critic-levers-capacity.yaml: the PVF at k = 2 at x1 and x4 of the policy's
    size (both fresh), from the policy, and pretrained; its base is critic-levers.yaml's, so its
    pvf-k2 is that study's reference experiment."""
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    folder = REPO_ROOT / "examples" / "studies"
    study = load_study_spec(folder / "critic-levers-capacity.yaml")
    levers = load_study_spec(folder / "critic-levers.yaml")
    assert study.base == levers.base and study.seeds == levers.seeds == [0, 1, 2, 3, 4]
    by_name = {r.variant: r.spec.critic for r in plan_runs(study, folder, out=tmp_path) if r.seed == 0}
    assert {c.updates_per_step for c in by_name.values()} == {2}
    assert {c.context for c in by_name.values()} == {"reference"}
    fresh, x4 = by_name["pvf-k2-fresh"], by_name["pvf-k2-x4"]
    assert (fresh.init, x4.init) == ("fresh", "fresh")
    assert (fresh.tiny.layers, fresh.tiny.hidden, x4.tiny.layers, x4.tiny.hidden) == (2, 128, 2, 256)
    assert by_name["pvf-k2-pretrained"].model_path == str(
        (tmp_path / "pretrain" / "pvf" / "policy-seed0" / "critic").resolve()
    )
    # Only the critic's size, start and pretrained weights differ from pvf-k2 (issue 40: "only").
    from lecritique.config.changes import spec_changes

    specs = {r.variant: r.spec for r in plan_runs(study, folder, out=tmp_path) if r.seed == 0}
    allowed = ("name", "critic.tiny", "critic.init", "critic.model_path")
    for variant, spec in specs.items():
        changed = [c.field for c in spec_changes(specs["pvf-k2"], spec)]
        assert all(field.startswith(allowed) for field in changed), (variant, changed)
    assert [list(p) for p in study.compared()] == [
        ["pvf-k2-x4", "pvf-k2-fresh"],
        ["pvf-k2", "pvf-k2-fresh"],
        ["pvf-k2-pretrained", "pvf-k2"],
    ]


def test_the_best_setting_study_puts_tether_and_mean_beside_the_pretrained_critic(tmp_path):
    """examples/studies/critic-levers-best.yaml: its base and pretrain stage are the capacity
    study's, so its mean and pvf-k2-pretrained are those studies' experiments."""
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    folder = REPO_ROOT / "examples" / "studies"
    study = load_study_spec(folder / "critic-levers-best.yaml")
    capacity = load_study_spec(folder / "critic-levers-capacity.yaml")
    assert study.base == capacity.base and study.pretrain == capacity.pretrain and len(study.seeds) == 5
    by_name = {r.variant: r.spec for r in plan_runs(study, folder, out=tmp_path) if r.seed == 0}
    pretrained = str((tmp_path / "pretrain" / "pvf" / "policy-seed0" / "critic").resolve())
    assert by_name["mean"].critic is None
    assert by_name["tether-pvf-pretrained"].estimator.name == "tether"
    assert (
        by_name["tether-pvf-pretrained"].critic.model_path
        == by_name["pvf-k2-pretrained"].critic.model_path
        == pretrained
    )
    assert ["tether-pvf-pretrained", "mean"] in [list(p) for p in study.compared()]


def test_the_data_study_feeds_the_same_critic_budget_four_times_the_fresh_trajectories(tmp_path):
    """examples/studies/critic-levers-data.yaml: k = 8 at 16 tasks and reuse 8 (critic-levers-k8.yaml's
    pvf-k8, same base) against k = 8 at 64 tasks and reuse 2 with the same critic batch, for the
    PVF and the VF: the budget is met on average in both, the fresh data per update differs x4."""
    from lecritique.config.critic_budget import spec_update_budget
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    folder = REPO_ROOT / "examples" / "studies"
    study = load_study_spec(folder / "critic-levers-data.yaml")
    levers = load_study_spec(folder / "critic-levers-k8.yaml")
    assert study.seeds == levers.seeds and len(study.seeds) == 5
    by_name = {r.variant: r.spec for r in plan_runs(study, folder, out=tmp_path) if r.seed == 0}
    levers_k8 = next(r.spec for r in plan_runs(levers, folder) if r.seed == 0 and r.variant == "pvf-k8")
    assert by_name["pvf-k8"].model_dump(exclude={"name"}) == levers_k8.model_dump(exclude={"name"})
    assert {spec.critic.updates_per_step for spec in by_name.values()} == {8}
    assert {spec.critic_batch_size for spec in by_name.values()} == {64}
    new_per_update = {name: spec.batch_size / spec.critic.updates_per_step for name, spec in by_name.items()}
    assert new_per_update == {"pvf-k8": 8.0, "pvf-k8-fresh": 32.0, "vf-k8-fresh": 32.0}
    assert {spec_update_budget(spec).nominal for spec in by_name.values()} == {8}
    assert (by_name["pvf-k8-fresh"].critic.context, by_name["vf-k8-fresh"].critic.context) == (
        "reference",
        "none",
    )
    assert [list(p) for p in study.compared()] == [
        ["pvf-k8-fresh", "pvf-k8"],
        ["pvf-k8-fresh", "vf-k8-fresh"],
    ]


def test_comparisons_and_pretrain_references_are_checked():
    with pytest.raises(ValueError, match=r"comparisons.0: \[vf, nope\] must name two different variants"):
        study(comparisons=[["vf", "nope"]])
    with pytest.raises(
        ValueError, match="names pretrain stage 'pvf', but the study's pretrain stages are none"
    ):
        study(variants=[{"name": "pvf", "overrides": {"critic": {"model_path": "pretrained:pvf"}}}])
    assert study().compared() == [("mean", "pvf"), ("vf", "pvf"), ("tether", "pvf")]


def test_a_variant_naming_the_pretrain_stage_gets_its_critic_in_the_study_folder(tmp_path):
    spec = study(
        pretrain=[{"name": "pvf", "budget": {"tasks_per_policy": 16}}],
        variants=[{"name": "pvf"}, {"name": "pre", "overrides": {"critic": {"model_path": "pretrained"}}}],
    )
    runs = {r.key: r.spec for r in plan_runs(spec, Path("."), out=tmp_path / "out")}
    assert runs["pre/seed0"].critic.model_path == str(
        (tmp_path / "out" / "pretrain" / "pvf" / "policy-seed0" / "critic").resolve()
    )
    assert runs["pvf/seed0"].critic.model_path is None


def test_a_variant_whose_critic_budget_is_marginal_is_named_once_before_its_runs():
    from lecritique.study.run import budget_warnings

    marginal = {
        "critic": {"context": "none", "updates_per_step": 4, "batch_size": 32, "replay": {"max_reuse": 2}}
    }
    spec = study(
        variants=[{"name": "pvf"}, {"name": "vf-k4", "overrides": marginal}],
        base={**BASE, "rollout": {**BASE["rollout"], "tasks_per_step": 16}},
    )
    found = budget_warnings(plan_runs(spec, Path(".")))
    assert list(found) == ["vf-k4"] and len(found["vf-k4"]) == 1, "one warning per variant, not per seed"
    assert "critic.updates_per_step = 4 is marginal" in found["vf-k4"][0]


def test_every_warning_of_a_variant_is_named_once_not_only_the_budget():
    """Issue 40: a study hears the same findings as ``lecritique run`` (config.findings)."""
    from lecritique.config.findings import warning_texts
    from lecritique.study.run import budget_warnings

    spec = study(
        variants=[
            {"name": "pvf"},
            {"name": "rare-eval", "overrides": {"orchestrator": {"eval_every": 10_000}}},
        ]
    )
    runs = plan_runs(spec, Path("."))
    found = budget_warnings(runs)
    assert list(found) == ["rare-eval"]
    [rare] = [run for run in runs if run.variant == "rare-eval"][:1]
    assert found["rare-eval"] == warning_texts(rare.spec)
    assert "orchestrator.eval_every = 10000 > orchestrator.steps" in found["rare-eval"][0]


def test_the_tether_study_runs_tether_and_mean_on_the_fresh_data_studys_critics(tmp_path):
    """examples/studies/critic-levers-tether.yaml: each TETHER arm's critic is configured exactly as
    critic-levers-data.yaml's fresh arm of the same context, and MEAN trains on the same 64 tasks a
    step, so the only differences are the estimator and what it does to the policy."""
    from lecritique.launch.local.launcher import REPO_ROOT
    from lecritique.study.config import load_study_spec

    folder = REPO_ROOT / "examples" / "studies"
    study = load_study_spec(folder / "critic-levers-tether.yaml")
    data = load_study_spec(folder / "critic-levers-data.yaml")
    assert study.seeds == data.seeds and len(study.seeds) == 5
    by_name = {r.variant: r.spec for r in plan_runs(study, folder, out=tmp_path) if r.seed == 0}
    fresh = {r.variant: r.spec for r in plan_runs(data, folder) if r.seed == 0}
    for tether, value in (("tether-vf-fresh", "vf-k8-fresh"), ("tether-pvf-fresh", "pvf-k8-fresh")):
        assert by_name[tether].estimator.name == "tether"
        assert by_name[tether].critic == fresh[value].critic
        assert by_name[tether].rollout == fresh[value].rollout
    assert by_name["mean-fresh"].critic is None
    assert by_name["mean-fresh"].rollout == fresh["vf-k8-fresh"].rollout
    assert [list(p) for p in study.compared()] == [
        ["tether-vf-fresh", "mean-fresh"],
        ["tether-pvf-fresh", "mean-fresh"],
        ["tether-vf-fresh", "tether-pvf-fresh"],
        ["tether-vf-fresh", "rloo-fresh"],
        ["tether-pvf-fresh", "rloo-fresh"],
    ]
    assert (
        by_name["rloo-fresh"].critic is None
        and by_name["rloo-fresh"].rollout == by_name["mean-fresh"].rollout
    )


def test_set_changes_the_base_of_every_variant_and_a_variant_still_wins_where_it_differs():
    """``lecritique study --set`` (``base_set``): applied to the base before each variant's overrides."""
    runs = {
        r.key: r.spec
        for r in plan_runs(study(base_set=["orchestrator.steps=7", "critic.context=none"]), Path("."))
    }
    assert {spec.orchestrator.steps for spec in runs.values()} == {7}
    assert runs["pvf/seed0"].critic.context == "none"  # the base's value, overridden
    assert runs["mean/seed0"].critic is None  # the variant's own override still applies after it


def test_a_bad_set_is_refused_naming_the_field_and_the_nearest_one():
    with pytest.raises(SpecError, match=r"study s, base spec: .*orchestrator\.stesp"):
        plan_runs(study(base_set=["orchestrator.stesp=7"]), Path("."))
