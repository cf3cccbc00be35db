"""The study's pretrain stage: run once per starting policy, before the variants, only when a
variant uses it, skipped when finished; its budget and result reach study.md."""

import json
from pathlib import Path

from rich.console import Console

from lecritique.study.config import StudySpec, plan_runs
from lecritique.study.run import _pretrain_summaries, run_pretrain
from lecritique.study.runner import KEPT, keep_scoring_critic
from tests.unit.study.test_study_plan import BASE


def levers(**changes):
    return StudySpec.model_validate(
        {
            "name": "s",
            "base": BASE,
            "reference": "pvf",
            "seeds": [0, 1],
            "pretrain": [
                {
                    "name": "pvf",
                    "overrides": {"critic": {"context": "reference"}},
                    "budget": {"tasks_per_policy": 64, "max_epochs": 3},
                }
            ],
            "variants": [
                {"name": "pvf"},
                {"name": "pre", "overrides": {"critic": {"model_path": "pretrained:pvf"}}},
            ],
            **changes,
        }
    )


def _recording(monkeypatch):
    import lecritique.pretrain.run as pretrain_run

    calls = []

    def fake(spec, budget, folder, show_progress=True):
        calls.append((spec, budget, folder))
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"best_held_out_ev": 0.2, "history": [1]}))

    monkeypatch.setattr(pretrain_run, "pretrain", fake)
    return calls


def test_the_stage_runs_once_per_starting_policy_with_its_budget_and_is_then_skipped(tmp_path, monkeypatch):
    calls = _recording(monkeypatch)
    study, out = levers(), tmp_path / "out"
    runs = plan_runs(study, Path("."), out=out)
    run_pretrain(study, Path("."), runs, out, Console(quiet=True), quick=False)
    run_pretrain(study, Path("."), runs, out, Console(quiet=True), quick=False)
    assert len(calls) == 2, "one stage per starting policy (seeds 0 and 1), a finished one skipped"
    for seed, (spec, budget, folder) in enumerate(calls):
        assert folder == (out / "pretrain" / "pvf" / f"policy-seed{seed}").resolve()
        assert budget.tasks_per_policy == 64 and budget.max_epochs == 3
        assert spec.critic.model_path is None and spec.critic.context == "reference" and spec.seed == seed
        assert spec.policy == runs[seed * 2].spec.policy, "the starting policy of the seed's runs"
    summary = _pretrain_summaries(study, out, runs)
    assert list(summary) == ["pvf (policy-seed0)", "pvf (policy-seed1)"]
    assert summary["pvf (policy-seed0)"]["result"] == {"best_held_out_ev": 0.2}


def test_one_starting_policy_keeps_one_stage_folder(tmp_path, monkeypatch):
    calls = _recording(monkeypatch)
    study, out = levers(policy_builds=1), tmp_path / "out"
    runs = plan_runs(study, Path("."), out=out)
    run_pretrain(study, Path("."), runs, out, Console(quiet=True), quick=False)
    assert [folder for _, _, folder in calls] == [(out / "pretrain" / "pvf").resolve()]
    summary = _pretrain_summaries(study, out, runs)["pvf"]
    assert summary["budget"]["tasks_per_policy"] == 64 and summary["result"] == {"best_held_out_ev": 0.2}


def test_an_unused_stage_does_not_run_and_quick_cuts_the_budget(tmp_path, monkeypatch):
    import lecritique.pretrain.run as pretrain_run

    calls = []
    monkeypatch.setattr(
        pretrain_run, "pretrain", lambda spec, budget, folder, show_progress=True: calls.append(budget)
    )
    unused = levers(variants=[{"name": "pvf"}])
    run_pretrain(
        unused,
        Path("."),
        plan_runs(unused, Path("."), out=tmp_path),
        tmp_path,
        Console(quiet=True),
        quick=False,
    )
    assert calls == []
    # study.md says why the stage has no result (issue 48: "not run" read as a failure).
    said = _pretrain_summaries(unused, tmp_path, plan_runs(unused, Path("."), out=tmp_path))
    assert said["pvf"]["unused"] == "not run: none of the variants run here uses it"
    used = levers()
    run_pretrain(
        used,
        Path("."),
        plan_runs(used, Path("."), out=tmp_path, quick=True),
        tmp_path,
        Console(quiet=True),
        quick=True,
    )
    assert calls[0].tasks_per_policy == 8 and calls[0].max_epochs == 1


def test_the_runner_keeps_the_critic_version_each_step_used(tmp_path):
    for version in (3, 4):
        folder = tmp_path / "weights" / "critic" / f"{version:08d}"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_text(f"v{version}")
    keep_scoring_critic(tmp_path, 3)
    keep_scoring_critic(tmp_path, 4)
    keep_scoring_critic(tmp_path, 9)  # already pruned: nothing to keep, the older copy stays
    assert [p.name for p in (tmp_path / KEPT).iterdir()] == ["00000004"]
    assert (tmp_path / KEPT / "00000004" / "model.safetensors").stat().st_nlink == 2, (
        "a hard link, not a copy"
    )
