"""``lecritique models stage``: a Hugging Face model folder copied into the weight volume's
``models/<tenant>/<name>`` (issue #41, item 5), on a tiny model saved with ``save_pretrained``.

The copy is checked before it lands (config.json, weights, shards), lands whole or not at all,
follows a Hugging Face cache's symbolic links, and loads as a policy from where it landed.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.models import staging
from lecritique.models.policy import load_policy
from lecritique.models.staging import StagingError, stage_model
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy

ARCHITECTURE = TinyArchitecture(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_random_tiny_policy(tmp_path / "tiny-policy", "0123456789+-=", architecture=ARCHITECTURE)


def _stage(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["models", "stage", *args])
    return done.exit_code, done.output


def test_a_model_is_staged_under_its_tenant_and_loads_from_there(model: Path, tmp_path: Path) -> None:
    root = tmp_path / "weights"
    code, output = _stage(str(model), "--tenant", "alice", "--root", str(root))
    assert code == 0, output
    target = root / "models" / "alice" / "tiny-policy"
    assert f"policy: {{path: {target}}}" in output
    comparison = filecmp.dircmp(model, target)
    assert not comparison.left_only and not comparison.right_only and not comparison.diff_files
    assert sorted(p.name for p in (root / "models" / "alice").iterdir()) == ["tiny-policy"]  # no leftovers
    policy, tokenizer = load_policy(target)
    assert policy.config.hidden_size == 32 and tokenizer("12")["input_ids"]

    code, output = _stage(str(model), "--tenant", "alice", "--root", str(root))
    assert code == 2 and "already exists; --force replaces it" in output
    (model / "extra.txt").write_text("new")
    code, output = _stage(
        str(model), "--tenant", "alice", "--root", str(root), "--force", "--name", "tiny-policy"
    )
    assert code == 0 and (target / "extra.txt").read_text() == "new"
    assert sorted(p.name for p in (root / "models" / "alice").iterdir()) == ["tiny-policy"]


def test_a_hugging_face_cache_snapshot_is_copied_not_linked(model: Path, tmp_path: Path) -> None:
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc123"
    shutil.copytree(model, blobs)
    snapshot.mkdir(parents=True)
    for file in blobs.iterdir():
        (snapshot / file.name).symlink_to(file)
    staged = stage_model(snapshot, tmp_path / "weights", "bob", "qwen-tiny")
    assert staged.path == tmp_path / "weights" / "models" / "bob" / "qwen-tiny"
    assert not any(path.is_symlink() for path in staged.path.iterdir())
    assert (staged.path / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda m: (m / "config.json").unlink(), "has no config.json"),
        (lambda m: (m / "config.json").write_text("{not json"), "is not JSON"),
        (lambda m: (m / "config.json").write_text('{"hidden_size": 4}'), "names no model_type"),
        (lambda m: (m / "model.safetensors").unlink(), "has no weight files"),
        (
            lambda m: (m / "model.safetensors.index.json").write_text(
                json.dumps(
                    {"weight_map": {"a": "model.safetensors", "b": "model-00002-of-00002.safetensors"}}
                )
            ),
            "model-00002-of-00002.safetensors",
        ),
    ],
)
def test_a_folder_that_is_not_a_whole_model_is_refused_before_anything_is_written(
    model: Path, tmp_path: Path, damage: object, message: str
) -> None:
    damage(model)  # type: ignore[operator]
    code, output = _stage(str(model), "--tenant", "alice", "--root", str(tmp_path / "weights"))
    assert code == 2 and message in output, output
    assert not (tmp_path / "weights" / "models" / "alice" / "tiny-policy").exists()


@pytest.mark.parametrize(
    ("tenant", "name"), [("Alice/..", None), ("alice", "../escape"), ("alice", ".hidden")]
)
def test_tenant_and_model_names_are_single_folder_names(
    model: Path, tmp_path: Path, tenant: str, name: str | None
) -> None:
    with pytest.raises(StagingError, match="must be"):
        stage_model(model, tmp_path / "weights", tenant, name)
    assert not (tmp_path / "escape").exists()


def test_a_copy_that_fails_leaves_neither_a_model_nor_a_partial_folder(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = []

    def check_then_fail(folder: Path) -> list[Path]:
        checks.append(folder)
        if len(checks) == 2:  # the copy, checked before it is renamed into place
            raise StagingError("disk full (simulated)")
        return [folder / "model.safetensors"]

    monkeypatch.setattr(staging, "check_model_folder", check_then_fail)
    with pytest.raises(StagingError, match="simulated"):
        stage_model(model, tmp_path / "weights", "alice")
    assert list((tmp_path / "weights" / "models" / "alice").iterdir()) == []


def test_staging_without_the_weight_volume_says_where_to_stage_here_and_that_works(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48 item 3: the advice of a refusal is a step that works on this machine."""
    from lecritique.cli.models import DEFAULT_ROOT

    if DEFAULT_ROOT.is_dir():
        pytest.skip(f"{DEFAULT_ROOT} exists on this machine (a pod with the weight volume)")
    code, output = _stage(str(model), "--tenant", "dev")
    assert code == 2 and "--root runs (the model lands in runs/models/dev/)" in output, output
    assert not DEFAULT_ROOT.exists()
    monkeypatch.chdir(tmp_path)  # the advice, followed from a checkout's root
    code, output = _stage(str(model), "--tenant", "dev", "--root", "runs")
    assert code == 0, output
    assert (tmp_path / "runs" / "models" / "dev" / "tiny-policy" / "config.json").is_file()
