"""The ``dataset`` environment: every file format, splits, privileged columns, bad rows named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lecritique.config import load_spec
from lecritique.critics.inputs import GroupMember, build_group_contexts
from lecritique.envs import build_environment, get_environment
from lecritique.envs.dataset import DatasetEnvironment
from lecritique.envs.dataset_files import DatasetError
from tests.unit.envs.dataset_support import (
    EXAMPLE_DATA,
    example_rows,
    split_sizes,
    write_csv,
    write_jsonl,
    write_parquet,
)

COLUMNS = {
    "prompt_column": "expression",
    "prompt_template": "{prompt}=",
    "id_column": "id",
    "verifier": {"kind": "numeric"},
}


def dataset(path: Path | str, **settings: Any) -> DatasetEnvironment:
    env = get_environment("dataset", path=str(path), **{**COLUMNS, **settings})
    assert isinstance(env, DatasetEnvironment)
    return env


def _hf_directory(tmp_path: Path, rows: list[dict[str, Any]], as_dict: bool) -> Path:
    import datasets

    directory = tmp_path / ("hf-dict" if as_dict else "hf")
    if as_dict:
        train = [row for row in rows if row["split"] == "train"]
        test = [row for row in rows if row["split"] == "test"]
        datasets.DatasetDict(
            {"train": datasets.Dataset.from_list(train), "test": datasets.Dataset.from_list(test)}
        ).save_to_disk(str(directory))
    else:
        datasets.Dataset.from_list(rows).save_to_disk(str(directory))
    return directory


def _signature(env: DatasetEnvironment, split: str) -> list[tuple[str, str, str | None, dict[str, str]]]:
    return sorted((t.task_id, t.prompt, t.reference, t.privileged) for t in env._tasks[split])  # type: ignore[misc]


def test_every_format_yields_the_same_tasks(tmp_path: Path) -> None:
    rows = example_rows()
    settings = {
        "privileged_columns": ["solution"],
        "split": {"kind": "column", "train": ["train"], "eval": ["test"]},
    }
    reference = dataset(EXAMPLE_DATA, **settings)
    assert split_sizes(reference) == {"train": 347, "eval": 53}
    for path in (
        write_csv(tmp_path / "rows.csv", rows),
        write_parquet(tmp_path / "rows.parquet", rows),
        _hf_directory(tmp_path, rows, as_dict=False),
    ):
        other = dataset(path, **settings)
        for split in ("train", "eval"):
            assert _signature(other, split) == _signature(reference, split), path


def test_a_dataset_dict_splits_by_its_split_names(tmp_path: Path) -> None:
    directory = _hf_directory(tmp_path, example_rows(), as_dict=True)
    env = dataset(
        directory, split={"kind": "column", "column": "_split", "train": ["train"], "eval": ["test"]}
    )
    assert split_sizes(env) == {"train": 347, "eval": 53}
    only_train = dataset(
        directory,
        hf_splits=["train"],
        split={"kind": "column", "column": "_split", "train": ["train"], "eval": ["test"]},
    )
    assert split_sizes(only_train) == {"train": 347, "eval": 0}
    with pytest.raises(DatasetError, match=r"no split\(s\) dev in the DatasetDict \(it has train, test\)"):
        dataset(directory, hf_splits=["dev"])


def test_hash_split_is_seeded_deterministic_and_keeps_a_row_in_one_split() -> None:
    first, again = dataset(EXAMPLE_DATA, eval_fraction=0.25), dataset(EXAMPLE_DATA, eval_fraction=0.25)
    assert _signature(first, "eval") == _signature(again, "eval")
    sizes = split_sizes(first)
    assert sizes["train"] + sizes["eval"] == 400 and 60 <= sizes["eval"] <= 140
    train_ids = {t.task_id for t in first._tasks["train"]}
    assert not train_ids & {t.task_id for t in first._tasks["eval"]}
    reseeded = dataset(EXAMPLE_DATA, eval_fraction=0.25, split={"kind": "hash", "seed": 1})
    assert {t.task_id for t in reseeded._tasks["eval"]} != {t.task_id for t in first._tasks["eval"]}


def test_column_split_leaves_out_rows_of_other_values(tmp_path: Path) -> None:
    rows = example_rows()[:10]
    for index, row in enumerate(rows):
        row["split"] = ["train", "test", "unused"][index % 3]
    env = dataset(write_jsonl(tmp_path / "rows.jsonl", rows), split={"kind": "column", "eval": ["test"]})
    assert split_sizes(env) == {"train": 4, "eval": 3}
    with pytest.raises(ValueError, match=r"split values \['train'\] are listed for both train and eval"):
        dataset(EXAMPLE_DATA, split={"kind": "column", "train": ["train"], "eval": ["train"]})


def test_sampling_is_seeded_and_cycles_past_the_split_size() -> None:
    env = dataset(EXAMPLE_DATA, split={"kind": "column", "train": ["train"], "eval": ["test"]})
    assert [t.task_id for t in env.sample_tasks(16, seed=3)] == [
        t.task_id for t in env.sample_tasks(16, seed=3)
    ]
    assert [t.task_id for t in env.sample_tasks(16, seed=3)] != [
        t.task_id for t in env.sample_tasks(16, seed=4)
    ]
    held_out = env.sample_tasks(120, split="eval", seed=0)
    assert len(held_out) == 120 and len({t.task_id for t in held_out[:53]}) == 53  # each row once per pass
    assert {t.task_id for t in held_out} == {t.task_id for t in env._tasks["eval"]}
    assert not {t.task_id for t in held_out} & {t.task_id for t in env.sample_tasks(347, seed=0)}


def test_privileged_columns_feed_the_critic_context() -> None:
    env = dataset(EXAMPLE_DATA, privileged_columns=["solution", "question"])
    assert env.privileged_kinds == ("answer", "solution", "question")
    task = env.sample_tasks(1, seed=0)[0]
    row = env.row(task)
    assert task.privileged == {
        "answer": row["answer"],
        "solution": row["solution"],
        "question": row["question"],
    }
    member = GroupMember("t0", "41", 0.0, task.privileged)
    assert build_group_contexts("reference", [member]) == [f"ref:{row['answer']}\n"]
    assert build_group_contexts("reference", [member], privileged_key="solution") == [
        f"ref:{row['solution']}\n"
    ]
    assert row["answer"] not in task.prompt.replace(row["expression"], "")  # the policy never sees the answer


def test_scoring_uses_the_verifier_and_answer_tags() -> None:
    env = dataset(EXAMPLE_DATA, answer_tags=True, prompt_template="{prompt}=\nAnswer in <answer></answer>.")
    task = env.sample_tasks(1, seed=0)[0]
    assert task.prompt.endswith("=\nAnswer in <answer></answer>.")
    assert env.score(task, f"so <answer> {task.reference} </answer>").reward == 1.0
    assert env.score(task, f"{task.reference}").diagnostic == "no <answer> tag"
    assert env.score(task, "<answer>1,000,000</answer>").diagnostic == "wrong answer '1,000,000'"
    demo = env.demonstrations(task, rng=None)  # type: ignore[arg-type]
    assert demo.turns == [(task.prompt, f"<answer>{task.reference}</answer>")]


def test_a_task_from_another_file_is_refused(tmp_path: Path) -> None:
    rows = example_rows()[:5]
    env = dataset(write_jsonl(tmp_path / "a.jsonl", rows), eval_fraction=0.01)
    rows[0]["answer"] = "12345"
    other = dataset(write_jsonl(tmp_path / "b.jsonl", rows), eval_fraction=0.01)
    task = next(t for t in other._tasks["train"] if t.reference == "12345")
    with pytest.raises(ValueError, match="does not come from dataset"):
        env.score(task, "1")


def test_relative_paths_start_at_the_spec_file(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLE_DATA.parent / "my-math-pvf.yaml")
    assert spec.environment.path == str(EXAMPLE_DATA)  # type: ignore[union-attr]
    assert split_sizes(build_environment(spec.environment)) == {"train": 347, "eval": 53}
    # The resolved spec (what the launcher writes into the run directory) keeps the absolute path.
    copied = tmp_path / "spec.json"
    copied.write_text(spec.model_dump_json())
    assert load_spec(copied).environment.path == str(EXAMPLE_DATA)  # type: ignore[union-attr]


# ---- bad input is named by row and column ----------------------------------------------------


def _rows_with(change: dict[str, Any], at: int = 2) -> list[dict[str, Any]]:
    rows = example_rows()[:5]
    rows[at] = {key: value for key, value in {**rows[at], **change}.items() if value is not ...}
    return rows


@pytest.mark.parametrize(
    ("rows", "settings", "message"),
    [
        (
            _rows_with({"answer": ...}),
            {},
            r"row 3 \(line 3\), column 'answer': missing \(the row has columns expression, id, question, solution, split\)",
        ),
        (_rows_with({"answer": "  "}), {}, r"row 3 \(line 3\), column 'answer': empty value"),
        (
            _rows_with({"answer": "eleven"}),
            {},
            r"row 3 \(line 3\), column 'answer': reference 'eleven' is not a number",
        ),
        (
            _rows_with({"solution": None}),
            {"privileged_columns": ["solution"]},
            r"row 3 \(line 3\), column 'solution': empty value",
        ),
        (
            _rows_with({"id": "arith-0000"}),
            {},
            r"row 3 \(line 3\), column 'id': id 'arith-0000' repeats row 1 \(line 1\)",
        ),
        (
            _rows_with({"answer": "("}),
            {"verifier": {"kind": "regex"}},
            r"row 3 \(line 3\), column 'answer': the pattern does not compile",
        ),
        (
            _rows_with({}),
            {"prompt_template": "{prompt}= ({units})"},
            r"row 1 \(line 1\), column 'units': missing",
        ),
        (
            _rows_with({"split": ...}),
            {"split": {"kind": "column"}},
            r"row 3 \(line 3\), column 'split': missing",
        ),
    ],
    ids=[
        "missing",
        "blank",
        "not-a-number",
        "privileged-empty",
        "duplicate-id",
        "bad-regex",
        "template-column",
        "split-column",
    ],
)
def test_bad_rows_are_named_by_row_and_column(
    tmp_path: Path, rows: list[dict[str, Any]], settings: dict[str, Any], message: str
) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    with pytest.raises(DatasetError, match=message):
        dataset(path, **settings)


def test_bad_lines_and_cells_name_the_line(tmp_path: Path) -> None:
    good = json.dumps(example_rows()[0])
    broken = tmp_path / "broken.jsonl"
    broken.write_text(f"{good}\n\n{good[:-3]}\n")
    with pytest.raises(DatasetError, match=r"broken.jsonl row 2 \(line 3\): not valid JSON"):
        dataset(broken)
    listed = tmp_path / "listed.jsonl"
    listed.write_text(f"{good}\n[1, 2]\n")
    with pytest.raises(DatasetError, match=r"row 2 \(line 2\): expected a JSON object, got list"):
        dataset(listed)
    csv_path = write_csv(tmp_path / "rows.csv", example_rows()[:3])
    csv_path.write_text(csv_path.read_text() + "arith-9,q,1+1,2,s,train,extra\n")
    with pytest.raises(DatasetError, match=r"rows.csv row 4 \(line 5\): 7 cells but 6 header columns"):
        dataset(csv_path)
    short = write_csv(tmp_path / "short.csv", example_rows()[:3])
    short.write_text(short.read_text() + "arith-9,q,1+1\n")
    with pytest.raises(DatasetError, match=r"short.csv row 4 \(line 5\), column 'answer': empty value"):
        dataset(short)
    rows = example_rows()[:4]
    rows[3]["answer"] = None
    with pytest.raises(DatasetError, match=r"rows.parquet row 4, column 'answer': empty value"):
        dataset(write_parquet(tmp_path / "rows.parquet", rows))


def test_every_bad_row_is_reported_in_one_pass(tmp_path: Path) -> None:
    """Issue 48 item 7: a JSON syntax error was reported first and the bad row only after a rerun.
    Now one refusal lists both (and a non-object line), in row order, and keeps the good rows' count."""
    good = example_rows()
    empty_answer = {**good[1], "answer": ""}
    path = tmp_path / "mixed.jsonl"
    lines = [json.dumps(good[0]), json.dumps(empty_answer), '{"id": "broken",}', "[1]", json.dumps(good[3])]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError) as raised:
        dataset(path)
    message = str(raised.value).splitlines()
    assert message[0] == f"dataset {path}: 3 bad rows"
    assert message[1:] == [
        f"  {path} row 2 (line 2), column 'answer': empty value",
        f"  {path} row 3 (line 3): not valid JSON: Expecting property name enclosed in double quotes",
        f"  {path} row 4 (line 4): expected a JSON object, got list",
    ]


def test_a_file_of_many_bad_rows_lists_the_first_twenty_and_counts_the_rest(tmp_path: Path) -> None:
    rows = [{**row, "answer": None} for row in example_rows()] * 5
    rows = [{**row, "id": f"row-{index}"} for index, row in enumerate(rows)]
    path = write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(DatasetError) as raised:
        dataset(path)
    message = str(raised.value).splitlines()
    assert message[0] == f"dataset {path}: {len(rows)} bad rows"
    assert len(message) == 1 + 20 + 1
    assert message[-1] == f"  ... and {len(rows) - 20} more (the first 20 are listed)"
    assert message[1] == f"  {path} row 1 (line 2), column 'answer': empty value"


def test_unusable_files_and_settings_are_explained(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        dataset(tmp_path / "nope.jsonl")
    (tmp_path / "rows.txt").write_text("x")
    with pytest.raises(DatasetError, match=r"cannot tell the format from the suffix '.txt'; set 'format'"):
        dataset(tmp_path / "rows.txt")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="has no rows"):
        dataset(tmp_path / "empty.jsonl")
    (tmp_path / "corrupt.parquet").write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        dataset(tmp_path / "corrupt.parquet")
    (tmp_path / "plain-dir").mkdir()
    with pytest.raises(DatasetError, match="not a directory written by save_to_disk"):
        dataset(tmp_path / "plain-dir")
    with pytest.raises(ValueError, match="privileged_columns must not repeat the reference column"):
        dataset(EXAMPLE_DATA, privileged_columns=["answer"])
    with pytest.raises(ValueError, match=r"prompt_template field \{0\} must be a column name"):
        dataset(EXAMPLE_DATA, prompt_template="{0}=")
    with pytest.raises(ValueError, match="entry_point must look like 'package.module:function'"):
        dataset(EXAMPLE_DATA, verifier={"kind": "python", "entry_point": "not an entry point"})
    env = dataset(EXAMPLE_DATA, split={"kind": "column", "eval": ["nothing"]})
    with pytest.raises(RuntimeError, match="has no eval rows"):
        env.sample_tasks(4, split="eval")


def test_the_shipped_problems_file_is_current() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_problems", EXAMPLE_DATA.parent / "generate_problems.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert EXAMPLE_DATA.read_text() == module.render(), "run python examples/datasets/generate_problems.py"


def test_dataset_roots_confine_what_a_spec_may_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    inside = write_jsonl(allowed / "rows.jsonl", example_rows()[:5])
    (tmp_path / "escape.jsonl").symlink_to(inside)
    (allowed / "link-out.jsonl").symlink_to(EXAMPLE_DATA)
    monkeypatch.setenv("LECRITIQUE_DATASET_ROOTS", f"{allowed}:{tmp_path / 'other'}")
    assert (
        split_sizes(dataset(inside, eval_fraction=0.01))["train"]
        + split_sizes(dataset(inside, eval_fraction=0.01))["eval"]
        == 5
    )
    for outside in ("/etc/passwd", str(allowed / ".." / "x.jsonl"), str(allowed / "link-out.jsonl")):
        with pytest.raises(DatasetError, match="is outside the allowed folders"):
            dataset(outside, format="csv")
    assert dataset(tmp_path / "escape.jsonl", eval_fraction=0.01)  # a link into an allowed folder is fine
