"""``--report-only`` on a partly run study: the finished runs are reported, the rest named."""

import json

import yaml

from lecritique.study.run import run_study
from tests.unit.study.test_study_plan import BASE


def test_report_only_marks_a_partial_study_and_reports_what_finished(tmp_path):
    study = {
        "name": "s",
        "base": {**BASE, "orchestrator": {"steps": 4}},
        "reference": "pvf",
        "seeds": [0, 1],
        "variants": [
            {"name": "pvf"},
            {"name": "mean", "overrides": {"estimator": {"name": "mean"}, "critic": None}},
        ],
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    for variant, seed, steps in (("pvf", 0, 4), ("mean", 0, 4), ("pvf", 1, 2)):
        folder = out / "runs" / variant / f"seed{seed}"
        folder.mkdir(parents=True)
        rows = [{"step": s, "reward_mean": 0.1 * s, "seconds": float(s)} for s in range(1, steps + 1)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    paths = run_study(path, out, report_only=True, ceiling=False)
    data = json.loads(paths["json"].read_text())
    assert data["unfinished"] == ["pvf/seed1", "mean/seed1"]
    assert set(data["runs"]["pvf"]) == {"0"}, "an unfinished run is not averaged in"
    assert data["summary"]["variants"]["pvf"]["final_reward"]["n"] == 1
    markdown = paths["md"].read_text()
    assert "**Partial study**: 2 of 4 runs missing or unfinished (pvf/seed1, mean/seed1)" in markdown
    assert not (out / "runs" / "mean" / "seed1").exists(), "report-only must not start a run"
