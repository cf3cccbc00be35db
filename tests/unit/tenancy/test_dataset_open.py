"""Dataset roots are checked where the file is opened, not only when the spec was submitted.

A tenant's dataset path passes the API's check while it is a plain file under the tenant's root;
swapped for a symbolic link to another file afterwards, it must not be followed. The check before
opening (``check_allowed``) is switched off here, so these tests hold the open-time check alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from lecritique.envs import dataset_files
from lecritique.envs.dataset_files import DatasetError, read_rows

ROW = {"prompt": "1+1", "answer": "2"}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    allowed = tmp_path / "datasets" / "alice"
    allowed.mkdir(parents=True)
    monkeypatch.setenv(dataset_files.ROOTS_ENV, str(allowed))
    monkeypatch.setattr(
        dataset_files, "check_allowed", lambda path: None
    )  # the race: checked earlier, swapped since
    return allowed


def test_a_file_swapped_for_a_symlink_after_submission_is_not_followed(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "other-tenant.jsonl"
    secret.write_text(json.dumps({"prompt": "secret", "answer": "hunter2"}) + "\n")
    data = root / "problems.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    assert [row.values for row in read_rows(data)] == [ROW]  # as submitted
    data.unlink()
    data.symlink_to(secret)
    with pytest.raises(DatasetError, match="outside the allowed folders") as refused:
        read_rows(data)
    assert "hunter2" not in str(refused.value)


def test_a_parent_folder_swapped_for_a_symlink_is_not_followed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "p.csv").write_text("prompt,answer\nsecret,hunter2\n")
    (root / "sub").symlink_to(outside)
    with pytest.raises(DatasetError, match="outside the allowed folders"):
        read_rows(root / "sub" / "p.csv")


def test_files_and_links_inside_the_roots_are_read(root: Path) -> None:
    (root / "p.csv").write_text("prompt,answer\n1+1,2\n")
    (root / "alias.csv").symlink_to(root / "p.csv")
    assert [row.values for row in read_rows(root / "alias.csv")] == [ROW]


def test_a_hugging_face_directory_is_read_through_the_checked_descriptor(root: Path) -> None:

    datasets.Dataset.from_list([ROW]).save_to_disk(str(root / "hf"))
    assert [row.values for row in read_rows(root / "hf")] == [ROW]
