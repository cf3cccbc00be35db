"""``lecritique report``: metrics.jsonl -> report.png + report.md."""

import json

import pytest

from lecritique.reporting import load_metrics, summarize, write_report


def _write_rows(run_dir, steps=30, torn=False):
    lines = []
    for step in range(1, steps + 1):
        row = {
            "step": step,
            "reward_mean": step / steps,
            "value_explained_variance": 0.1 if step > 1 else None,
            "tether_rho": 0.01 * step,
            "dropped_stale": 1 if step == 5 else 0,
            "seconds": 2.0 * step,
        }
        if step % 10 == 0:
            row["eval_success"] = step / 100
        lines.append(json.dumps(row))
    text = "\n".join(reversed(lines)) + "\n"  # out of order on purpose: rows are sorted by step
    if torn:
        text += '{"step": 31, "reward_me'
    (run_dir / "metrics.jsonl").write_text(text)


def test_report_summarises_the_run_and_draws_every_curve(tmp_path):
    _write_rows(tmp_path, torn=True)
    rows = load_metrics(tmp_path)
    assert [row["step"] for row in rows] == list(range(1, 31))  # the torn last line is ignored
    summary = summarize(rows)
    assert summary.reward_start == pytest.approx(sum(range(1, 11)) / 10 / 30)
    assert summary.reward_end == pytest.approx(sum(range(21, 31)) / 10 / 30)
    assert summary.rho_end == pytest.approx(0.30) and summary.dropped_stale == 1 and summary.seconds == 60.0

    png, md = write_report(tmp_path, title="unit")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    text = md.read_text()
    assert text.startswith("# unit") and "![curves](report.png)" in text
    assert "| reward gain | 0.667 |" in text
    assert "| held-out greedy success, step 10 | 0.100 |" in text
    assert "| held-out greedy success, step 30 | 0.300 |" in text
    assert "| rollouts dropped as stale | 1 |" in text


def test_a_run_without_evaluations_or_critic_still_reports(tmp_path):
    rows = [{"step": s, "reward_mean": 0.5, "seconds": float(s)} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, md = write_report(tmp_path)
    text = md.read_text()
    assert "held-out" not in text and "| TETHER rho, final | n/a |" in text


def test_one_evaluation_is_one_row(tmp_path):
    """Not the step-25 row twice, as 'first' and 'last' (issue 30)."""
    rows = [
        {"step": s, "reward_mean": 0.5, "seconds": float(s)} | ({"eval_success": 0.25} if s == 25 else {})
        for s in range(1, 31)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, md = write_report(tmp_path)
    assert md.read_text().count("| held-out greedy success, step 25 | 0.250 |") == 1


def test_a_directory_without_metrics_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        load_metrics(tmp_path)


def test_per_bucket_rho_and_explained_variance_are_drawn_and_tabulated(tmp_path):
    rows = []
    for step in range(1, 21):
        row = {
            "step": step,
            "reward_mean": 0.5,
            "tether_rho": 0.2,
            "tether_rho_bucket_0": 0.1,
            "tether_rho_bucket_1": 0.3 + 0.01 * step,
        }
        row["value_ev_bucket_0"] = 0.2
        if step % 2:  # bucket 1's explained variance is undefined on some steps (left out of the row)
            row["value_ev_bucket_1"] = 0.6
        rows.append(row)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    png, md = write_report(tmp_path)
    text = md.read_text()
    assert "| bucket | TETHER rho, final | critic EV, last 10 steps |" in text
    assert "| 0 | 0.100 | 0.200 |" in text and "| 1 | 0.500 | 0.600 |" in text
    without_buckets = tmp_path / "plain"
    without_buckets.mkdir()
    (without_buckets / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": r["step"], "reward_mean": 0.5}) + "\n" for r in rows)
    )
    plain_png, plain_md = write_report(without_buckets)
    assert "| bucket |" not in plain_md.read_text()
    # two more panels (rho per bucket, EV per bucket, plus the global rho) make a taller figure
    from PIL import Image

    assert Image.open(png).size[1] > Image.open(plain_png).size[1]


def test_the_initial_evaluation_is_step_0_and_no_policy_step(tmp_path):
    rows = [{"step": 0, "eval_success": 0.125, "eval_reward_mean": 0.2, "seconds": 1.0, "policy_version": 0}]
    rows += [
        {"step": s, "reward_mean": 0.5, "seconds": 2.0 + s} | ({"eval_success": 0.5} if s == 4 else {})
        for s in range(1, 5)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert summarize(load_metrics(tmp_path)).steps == 4
    _, md = write_report(tmp_path)
    text = md.read_text()
    assert "| policy steps | 4 |" in text
    assert (
        "| held-out greedy success, step 0 | 0.125 |" in text
        and "| held-out greedy success, step 4 | 0.500 |" in text
    )


def test_the_bucket_table_shows_the_single_rho_and_says_what_a_bucket_is(tmp_path):
    """TETHER with one rho and the critic's EV in 4 position buckets: the rho is every bucket's,
    never n/a beside a summary that has it (issue 41)."""
    rows = [
        {"step": s, "reward_mean": 0.5, "tether_rho": 0.5 + 0.001 * s}
        | {f"value_ev_bucket_{m}": 0.1 * m for m in range(4)}
        for s in range(1, 80)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, md = write_report(tmp_path)
    text = md.read_text()
    assert "| TETHER rho, final | 0.579 |" in text
    assert "A bucket is a range of response positions" in text
    assert (
        "| bucket | TETHER rho, final (TETHER's one rho, for every bucket) | critic EV, last 10 steps |"
        in text
    )
    assert (
        "| 0 | 0.579 | 0.000 |" in text
        and "| 3 | 0.579 | 0.300 |" in text
        and "n/a" not in text.split("Per bucket")[1]
    )
    one = tmp_path / "one"
    one.mkdir()
    (one / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "reward_mean": 0.5, "tether_rho": 0.25, "value_ev_bucket_0": 0.4}) + "\n"
            for s in (1, 2)
        )
    )
    _, one_md = write_report(one)
    assert (
        "One response-position bucket (all positions): TETHER rho, final 0.250; critic EV, last 1 steps 0.400."
        in one_md.read_text()
    )
    assert "| bucket |" not in one_md.read_text()
