"""A rerun of a spec naming a tiny build is the same run wherever the build's folder lies (issue 48 item 0).

On a busy machine an earlier version handed out a cut build from ``.uncached-<key>-...``; once the
whole build was cached under ``<key>``, the demo's own command was refused: "runs/demo holds a run
of a different spec (policy.path: '.../.uncached-020126...' -> '.../020126...')".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lecritique.config import parse_spec
from lecritique.launch.local.launcher import SpecDrift, check_recorded_spec
from lecritique.tinybuild.identity import build_key, same_build

KEY = "020126493fae48033d2d"


def _build(root: Path, name: str, **settings: object) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    config = {"task": "sudoku-mini", "seed": 0, "max_minutes": None, **settings}
    (folder / "build_config.json").write_text(json.dumps(config))
    return folder


def _spec(policy: Path) -> dict:
    return {
        "name": "demo",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
        "policy": {"path": str(policy)},
        "estimator": {"name": "mean"},
        "orchestrator": {"steps": 3},
    }


def test_the_demo_s_rerun_after_its_build_was_cached_is_the_same_run(tmp_path: Path) -> None:
    cut = _build(tmp_path / "tiny", f".uncached-{KEY}-2951-1796522916151292118", max_minutes=6.0)
    whole = _build(tmp_path / "tiny", KEY)
    out = tmp_path / "runs" / "demo"
    out.mkdir(parents=True)
    (out / "spec.json").write_text(json.dumps(_spec(cut)))
    rerun = parse_spec(_spec(whole))
    with pytest.raises(SpecDrift, match="policy.path"):
        check_recorded_spec(out, rerun)  # compared by path: the refusal the issue reports
    assert check_recorded_spec(out, rerun, same_model=same_build) is None
    # The cut folder since removed (a day later): the keys in the names still say it.
    for item in cut.iterdir():
        item.unlink()
    cut.rmdir()
    assert check_recorded_spec(out, rerun, same_model=same_build) is None


def test_another_build_or_another_model_is_another_run(tmp_path: Path) -> None:
    first = _build(tmp_path / "tiny", KEY)
    reseeded = _build(tmp_path / "tiny", "1" * 20, seed=1)
    assert not same_build(first, reseeded)
    mine = tmp_path / "my-model"
    mine.mkdir()
    assert not same_build(first, mine) and same_build(mine, mine)
    out = tmp_path / "run"
    out.mkdir()
    (out / "spec.json").write_text(json.dumps(_spec(first)))
    with pytest.raises(SpecDrift, match="policy.path"):
        check_recorded_spec(out, parse_spec(_spec(reseeded)), same_model=same_build)


def test_build_keys_are_read_from_cache_folder_names() -> None:
    assert build_key(f"/c/tiny/{KEY}") == KEY
    assert build_key(f"/c/tiny/.uncached-{KEY}-12-34") == KEY
    assert build_key("/models/qwen3-4b") is None
