"""Bring your own dataset: single-turn tasks read from a file, scored by a verifier from the spec.

Turn protocol::

    prompt   the row's prompt column (or ``prompt_template`` filled with the row's columns)
    action   the answer (whole text), or with ``answer_tags`` any text containing <answer>...</answer>

The file is JSON lines, CSV, Parquet, or a Hugging Face ``save_to_disk`` directory
(:mod:`lecritique.envs.dataset_files`); the verifier is chosen in the spec
(:mod:`lecritique.envs.verifiers`). Splits: by a column's value, or by a seeded hash of each row's
id (or prompt), so the same row always lands in the same split. Privileged context: ``answer`` (the
reference column) and every ``privileged_columns`` entry under its own name, so a PVF critic
(``critic.context: reference``, ``critic.privileged_key``) reads them with no code. Every row is
checked when the environment is built; every bad one (the first 20 listed) is reported by row and column.
"""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from lecritique.envs.answers import extract_answer, tagged
from lecritique.envs.base import Demonstration, Environment, ScoreResult, Split, Task
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.dataset_files import DatasetError, DatasetFormat, Row, cell_text, read_rows
from lecritique.envs.splits import content_digest, derive_seed, split_of, task_id
from lecritique.envs.verifiers import ExactVerifierConfig, Verifier, VerifierConfig, build_verifier

REFERENCE_KEY = "answer"
"""Privileged key of the reference column (as in the built-in environments)."""


class HashSplitConfig(BaseModel):
    """Rows go to the eval split when a seeded hash of their id (or prompt) is below ``eval_fraction``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    kind: Literal["hash"] = "hash"
    """Split by a seeded hash."""
    seed: int = 0
    """Salts the hash: another seed draws another eval set of the same expected size."""


class ColumnSplitConfig(BaseModel):
    """Rows go to the split their column names; rows with other values are left out."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    kind: Literal["column"] = "column"
    """Split by a column's value."""
    column: str = "split"
    """The column (``_split`` for the split names of a Hugging Face DatasetDict)."""
    train: tuple[str, ...] = ("train",)
    """Values that mark training rows."""
    eval: tuple[str, ...] = ("eval", "test", "validation")
    """Values that mark held-out rows."""

    @model_validator(mode="after")
    def _disjoint(self) -> ColumnSplitConfig:
        both = sorted(set(self.train) & set(self.eval))
        if both:
            raise ValueError(f"split values {both} are listed for both train and eval")
        return self


SplitConfig = Annotated[HashSplitConfig | ColumnSplitConfig, Field(discriminator="kind")]


class DatasetConfig(EnvironmentConfigBase):
    kind: Literal["dataset"] = "dataset"
    """Selects the bring-your-own-dataset environment."""
    path: str = Field(json_schema_extra={"x-tenant-rule": "dataset_path"})
    """File (.jsonl, .csv, .parquet) or save_to_disk directory; relative paths start at the spec file's folder."""
    format: DatasetFormat = "auto"
    """jsonl, csv, parquet or hf_disk; auto: from the suffix (a directory is hf_disk)."""
    hf_splits: tuple[str, ...] = ()
    """Splits of a DatasetDict to read (empty: all); each row's split name is in column ``_split``."""
    prompt_column: str = "prompt"
    """Column holding what the policy sees."""
    reference_column: str = "answer"
    """Column holding the reference answer (the verifier's target and the critic's ``answer``)."""
    privileged_columns: tuple[str, ...] = ()
    """More columns only the critic sees (worked solutions, hints), keyed by column name."""
    id_column: str | None = None
    """Column of unique row ids (None: ids from the prompt and reference)."""
    prompt_template: str | None = None
    """Python format string over the row's columns (``{prompt}`` is the prompt column), e.g. an answer-tag instruction."""
    answer_tags: bool = False
    """Score only the content of the last <answer></answer> pair (else the whole completion)."""
    verifier: VerifierConfig = Field(default_factory=ExactVerifierConfig)
    """How answers are checked (``kind``: exact, numeric, math_verify, regex, python)."""
    split: SplitConfig = Field(default_factory=HashSplitConfig)
    """Train/eval split: ``hash`` (uses eval_fraction) or ``column``."""
    max_answer_chars: int = Field(default=4096, ge=1)
    """Longer completions score 0 before the verifier (the spec's ``verifier``) sees them."""

    @field_validator("path")
    @classmethod
    def _resolve_path(cls, path: str, info: ValidationInfo) -> str:
        # load_spec passes the spec file's folder, so a spec and its data file travel together.
        base = (info.context or {}).get("spec_dir")
        if not path.strip():
            raise ValueError("path must name a dataset file or directory")
        if base is not None and not Path(path).expanduser().is_absolute():
            return str((Path(base) / path).resolve())
        return str(Path(path).expanduser())

    @field_validator("prompt_template")
    @classmethod
    def _template_fields(cls, template: str | None) -> str | None:
        if template is not None:
            for name in template_fields(template):
                # Attribute access, indexing and positional fields have no meaning for a row.
                if not name or name.isdigit() or "." in name or "[" in name:
                    raise ValueError(f"prompt_template field {{{name}}} must be a column name")
        return template

    @model_validator(mode="after")
    def _columns(self) -> DatasetConfig:
        if REFERENCE_KEY in self.privileged_columns or self.reference_column in self.privileged_columns:
            raise ValueError(
                f"privileged_columns must not repeat the reference column or be named {REFERENCE_KEY!r}: "
                f"the reference is already the critic's {REFERENCE_KEY!r}"
            )
        if len(set(self.privileged_columns)) != len(self.privileged_columns):
            raise ValueError("privileged_columns has duplicates")
        return self


def template_fields(template: str) -> list[str]:
    """The field names a format string uses (ValueError for a malformed one)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"prompt_template is not a valid format string: {error}") from None
    return [name for _, name, _, _ in parsed if name is not None]


MAX_LISTED_BAD_ROWS = 20
"""How many bad rows one refusal lists (all are counted)."""


def bad_rows_message(path: str, problems: list[str]) -> str:
    """One message for every bad row of a dataset: the count, then each problem on its own line."""
    if len(problems) == 1:
        return problems[0]
    listed = problems[:MAX_LISTED_BAD_ROWS]
    more = len(problems) - len(listed)
    tail = [f"  ... and {more} more (the first {len(listed)} are listed)"] if more else []
    return "\n".join([f"dataset {path}: {len(problems)} bad rows", *(f"  {text}" for text in listed), *tail])


class DatasetEnvironment(Environment):
    name: ClassVar[str] = "dataset"

    def __init__(self, config: DatasetConfig) -> None:
        self.config = config
        # Instance-level: the kinds depend on the spec's columns.
        self.privileged_kinds = (REFERENCE_KEY, *config.privileged_columns)  # type: ignore[misc]
        self.max_action_chars = config.max_answer_chars
        try:
            self.verifier: Verifier = build_verifier(config.verifier)
        except ValueError as error:
            raise DatasetError(f"dataset {config.path}: {error}") from None
        self._rows: dict[int, tuple[dict[str, Any], str]] = {}
        """Row number -> (values, digest of the task's prompt and reference) of every kept row."""
        self._tasks: dict[str, list[Task]] = {"train": [], "eval": []}
        problems: list[tuple[int, str]] = []
        rows = read_rows(Path(config.path), config.format, config.hf_splits, problems)
        self._load(rows, problems)

    # ---- loading ---------------------------------------------------------------------------
    def _cell(self, row: Row, column: str, required: bool = True) -> str | None:
        if column not in row.values:
            if not required:
                return None
            known = ", ".join(sorted(row.values)) or "none"
            raise DatasetError(
                f"{self.config.path} {row.where}, column {column!r}: missing (the row has columns {known})"
            )
        text = cell_text(row.values[column])
        if text is None and required:
            raise DatasetError(f"{self.config.path} {row.where}, column {column!r}: empty value")
        return text

    def _prompt(self, row: Row) -> str:
        prompt = self._cell(row, self.config.prompt_column)
        assert prompt is not None
        if self.config.prompt_template is None:
            return prompt
        cells = {
            name: self._cell(row, name)
            for name in template_fields(self.config.prompt_template)
            if name != "prompt"
        }
        return self.config.prompt_template.format_map({**cells, "prompt": prompt})

    def _split(self, row: Row, split_key: str) -> Split | None:
        split = self.config.split
        if isinstance(split, ColumnSplitConfig):
            value = self._cell(row, split.column)
            return "train" if value in split.train else "eval" if value in split.eval else None
        return split_of(f"dataset:{split.seed}", split_key, self.config.eval_fraction)

    def _load(self, rows: list[Row], problems: list[tuple[int, str]]) -> None:
        """Check every row and keep the good ones; raise once, listing every bad row (those
        ``problems`` the file's reading found too), when there is any."""
        if not rows and not problems:
            raise DatasetError(f"dataset {self.config.path} has no rows")
        seen_ids: dict[str, str] = {}
        for row in rows:
            try:
                self._load_row(row, seen_ids)
            except DatasetError as error:
                problems.append((row.number, str(error)))
        if problems:
            raise DatasetError(bad_rows_message(self.config.path, [text for _, text in sorted(problems)]))

    def _load_row(self, row: Row, seen_ids: dict[str, str]) -> None:
        prompt = self._prompt(row)
        reference = self._cell(row, self.config.reference_column)
        assert reference is not None
        try:
            self.verifier.check_reference(reference)
        except ValueError as error:
            raise DatasetError(
                f"{self.config.path} {row.where}, column {self.config.reference_column!r}: {error}"
            ) from None
        privileged = {REFERENCE_KEY: reference}
        for column in self.config.privileged_columns:
            privileged[column] = str(self._cell(row, column))
        if self.config.id_column is not None:
            row_id = str(self._cell(row, self.config.id_column))
            if row_id in seen_ids:
                raise DatasetError(
                    f"{self.config.path} {row.where}, column {self.config.id_column!r}: id {row_id!r} repeats {seen_ids[row_id]}"
                )
            seen_ids[row_id] = row.where
            identity = f"id\n{row_id}"
        else:
            identity = f"content\n{prompt}\n{reference}"
        split = self._split(row, row_id if self.config.id_column is not None else prompt)
        if split is None:
            return
        digest = content_digest(prompt, reference)
        self._rows[row.number] = (row.values, digest)
        self._tasks[split].append(
            Task(
                task_id=task_id(self.name, identity),
                prompt=prompt,
                reference=reference,
                privileged=privileged,
                metadata={"row": row.number},
            )
        )

    # ---- the environment -------------------------------------------------------------------
    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        """``n`` rows of ``split`` in a seeded order; past the split's size, further shuffled passes."""
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        pool = self._tasks[split]
        if n and not pool:
            raise RuntimeError(
                f"dataset {self.config.path} has no {split} rows (split: {self.config.split.kind})"
            )
        tasks: list[Task] = []
        epoch = 0
        while len(tasks) < n:
            order = list(range(len(pool)))
            random.Random(derive_seed(self.name, seed, split, epoch)).shuffle(order)
            tasks += [pool[index] for index in order[: n - len(tasks)]]
            epoch += 1
        return tasks

    def row(self, task: Task) -> dict[str, Any]:
        """The dataset row behind ``task`` (checked against the task's content)."""
        found = self._rows.get(int(task.metadata.get("row", -1)))
        if found is None or content_digest(task.prompt, task.reference) != found[1]:
            raise ValueError(
                f"task {task.task_id} does not come from dataset {self.config.path} as loaded here"
            )
        return found[0]

    def score(self, task: Task, completion: str) -> ScoreResult:
        if isinstance(completion, str) and len(completion) > self.config.max_answer_chars:
            return ScoreResult(0.0, f"answer longer than {self.config.max_answer_chars} characters")
        answer, problem = extract_answer(completion, self.config.answer_tags)
        if answer is None:
            return ScoreResult(0.0, problem)
        assert task.reference is not None
        return self.verifier.verify(answer, task.reference, self.row(task))

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        assert task.reference is not None
        return Demonstration(
            [(task.prompt, tagged(task.reference) if self.config.answer_tags else task.reference)]
        )
