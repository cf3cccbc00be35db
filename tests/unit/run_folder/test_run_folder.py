"""The run folder has one owner (issue #47 item 5): ``lecritique.run_folder.RunFolder`` reads what the
orchestrator and ``lecritique run`` write, and no other module spells the folder's file names."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from lecritique.orchestrator.state import CheckpointStore, OrchestratorState
from lecritique.run_folder import METRICS_FILE, PENDING_FILE, SPEC_FILE, STATE_FILE, RunFolder

LIBS = Path(__file__).resolve().parents[3] / "libs" / "lecritique"


def _checkpoint(folder: Path, **state: object) -> None:
    (folder / "orchestrator").mkdir(parents=True, exist_ok=True)
    (folder / "orchestrator" / "state.json").write_text(json.dumps(state))


def test_a_fresh_folder_records_nothing_and_is_not_finished(tmp_path):
    folder = RunFolder(tmp_path)
    assert (
        folder.recorded_spec() is None and folder.recorded_steps() is None and folder.recorded_name() is None
    )
    assert folder.checkpoint() is None and folder.completed_step() == 0
    assert folder.finished_step(5) is None and folder.ended_by(5) is None
    assert folder.last_step() == 0 and not folder.is_finished(5)
    with pytest.raises(FileNotFoundError, match="a lecritique run directory"):
        folder.metrics()


def test_the_recorded_spec_gives_steps_and_name_and_a_bad_one_is_named(tmp_path):
    (tmp_path / "spec.json").write_text(json.dumps({"name": "arm-a", "orchestrator": {"steps": 40}}))
    assert RunFolder(tmp_path).recorded_steps() == 40 and RunFolder(tmp_path).recorded_name() == "arm-a"
    (tmp_path / "spec.json").write_text("{not json")
    with pytest.raises(ValueError, match="spec.json is not readable JSON"):
        RunFolder(tmp_path).recorded_spec()
    assert RunFolder(tmp_path).recorded_steps() is None  # unreadable: check_recorded_spec says why
    (tmp_path / "spec.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds list, not a spec object"):
        RunFolder(tmp_path).recorded_spec()


def test_what_the_orchestrators_checkpoint_store_writes_is_what_the_folder_reads(tmp_path):
    folder = RunFolder(tmp_path)
    store = CheckpointStore(folder.checkpoint_dir)
    store.save(OrchestratorState(completed_step=7))
    assert folder.completed_step() == 7 and folder.finished_step(7) == 7 and folder.ended_by(7) == "steps"
    assert folder.finished_step(10) is None  # steps remain and no wall budget was spent
    store.save(OrchestratorState(completed_step=7, wall_budget_spent=True))
    assert folder.finished_step(10) == 7 and folder.ended_by(10) == "wall budget"
    assert store.state_path == folder.state_path and store.pending_path == folder.pending_path


def test_a_pending_step_means_not_finished(tmp_path):
    _checkpoint(tmp_path, completed_step=3)
    (tmp_path / "orchestrator" / "pending.bin").write_bytes(b"\0")
    assert RunFolder(tmp_path).has_pending_step() and RunFolder(tmp_path).finished_step(3) is None


@pytest.mark.parametrize("state", ["{}", '{"completed_step": "three"}', "[3]", "not json"])
def test_a_checkpoint_it_cannot_read_is_not_a_finished_run(tmp_path, state):
    (tmp_path / "orchestrator").mkdir()
    (tmp_path / "orchestrator" / "state.json").write_text(state)
    assert RunFolder(tmp_path).finished_step(0) is None and RunFolder(tmp_path).completed_step() == 0


def test_metrics_rows_come_in_step_order_without_torn_or_malformed_lines(tmp_path):
    lines = [
        '{"step": 2, "reward_mean": 0.5}',
        "",
        '{"step": 1}',
        '"a string"',
        '{"step": "x"}',
        '{"step": 3, "rew',
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines))
    folder = RunFolder(tmp_path)
    assert [row["step"] for row in folder.metrics()] == [1, 2]
    assert folder.last_step() == 2 and folder.is_finished(2) and not folder.is_finished(3)


def test_no_other_module_spells_the_run_folders_file_names():
    """A string that is exactly one of the folder's file names, outside ``run_folder.py``, is a second
    owner of the layout (``spec.json`` in the Kubernetes ConfigMap is a key of its own, and the
    trackers keep a ``state.json`` of their own under ``tracking/``)."""
    names = {SPEC_FILE, METRICS_FILE, STATE_FILE, PENDING_FILE}
    allowed = {("launch/kubernetes/render.py", SPEC_FILE), ("tracking/base.py", STATE_FILE)}
    found = []
    for path in LIBS.rglob("*.py"):
        relative = path.relative_to(LIBS).as_posix()
        if relative == "run_folder.py" or relative.startswith("v1/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and node.value in names
                and (relative, node.value) not in allowed
            ):
                found.append(f"{relative}:{node.lineno} {node.value!r}")
    assert found == [], found
