"""``--set`` on every command that takes a spec (issue #47 item 4): ``critic pretrain`` and ``study``
refuse an unknown path naming the nearest field before anything is built or run."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from lecritique.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_critic_pretrain_takes_set_and_refuses_an_unknown_field(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "critic",
            "pretrain",
            str(EXAMPLES / "sudoku-mini" / "pvf.yaml"),
            "--out",
            str(tmp_path / "out"),
            "--set",
            "critic.contxt=reference",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "critic.contxt" in result.output and "context" in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was built


def test_study_takes_set_and_refuses_an_unknown_field(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "study",
            str(EXAMPLES / "studies" / "critic-pays.yaml"),
            "--out",
            str(tmp_path / "study"),
            "--set",
            "orchestrator.max_secnds=50",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "orchestrator.max_secnds" in result.output and "max_seconds" in result.output
    assert not (tmp_path / "study" / "runs").exists()
