"""A weighted mixture of Reasoning Gym datasets (PyPI ``reasoning-gym``), single-turn.

Turn protocol::

    prompt   the dataset's question, a newline, and "Put your final answer between <answer>
             and </answer>."
    action   any text; the answer is the content of the last <answer>...</answer> pair

The extracted answer is scored with the source dataset's own ``score_answer`` (so the reward is
that dataset's: usually 0/1, for some datasets partial credit in [0, 1]; ``binary_reward``
rounds everything below 1 down to 0): in the verifier's process only for datasets whose scorer is
proven never to execute the answer, in a fresh sandbox process per answer for every other one
(:mod:`lecritique.envs.reasoning_gym_scoring` says why and how). Any dataset name the library registers works, with its own
generator settings::

    datasets: {basic_arithmetic: 2, chain_sum: {weight: 1, config: {min_terms: 2, max_terms: 3}}}

Items come from reasoning-gym's ``composite`` dataset in chunks of ``chunk_size`` items, each chunk
under a seed derived from the sampling seed and the chunk number (some generators precompute or
cap their virtual size, so one huge virtual dataset is not an option); a task records the
composite seed and item index so that any replica with the same configuration regenerates the
exact entry to score it (reasoning-gym items are deterministic per seed and index). Splits: by a hash of the source dataset name and the question. Privileged context:
``answer`` (the dataset's reference answer; for datasets without a single reference answer, such
as graph colouring, the task has no reference and the privileged answer says so).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lecritique.envs.answers import ANSWER_INSTRUCTION, extract_answer, short, tagged
from lecritique.envs.base import Demonstration, Environment, ScoreResult, Split, Task
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.reasoning_gym_fixes import after_scorer, before_scorer
from lecritique.envs.reasoning_gym_scoring import SCORING_SANDBOX, SandboxedScorer, scored_in_process
from lecritique.envs.splits import content_digest, derive_seed, sample_split, task_id

NO_REFERENCE = "(no single reference answer; the dataset checks answers by rules)"
_ENTRY_CACHE_SIZE = 4096
_COMPOSITE_CACHE_SIZE = 16


class ReasoningGymDataset(BaseModel):
    """One dataset of the mixture."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    weight: float = Field(default=1.0, gt=0.0)
    """Relative sampling weight."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Keyword settings of the dataset's generator (its reasoning-gym config class), without seed/size."""


def _default_mixture() -> dict[str, float | ReasoningGymDataset]:
    return {"basic_arithmetic": 1.0}


class ReasoningGymConfig(EnvironmentConfigBase):
    kind: Literal["reasoning_gym"] = "reasoning_gym"
    """Selects the Reasoning Gym mixture environment."""
    datasets: dict[str, float | ReasoningGymDataset] = Field(default_factory=_default_mixture)
    """Dataset name -> weight, or -> {weight, config}; names are reasoning-gym's registered datasets."""
    binary_reward: bool = False
    """Round partial credit down: reward 1 only when the dataset scores the answer as fully correct."""
    chunk_size: int = Field(default=500, ge=1, le=20_000)
    """Virtual size of each generated composite chunk (some generators precompute this many items)."""

    @field_validator("datasets")
    @classmethod
    def _known_datasets(cls, datasets: dict[str, float | ReasoningGymDataset]) -> dict[str, Any]:
        if not datasets:
            raise ValueError("datasets must name at least one reasoning-gym dataset")
        known = registered_datasets()
        unknown = sorted(name for name in datasets if name not in known or name == "composite")
        if unknown:
            raise ValueError(
                f"unknown reasoning-gym dataset(s) {', '.join(unknown)}; known: {', '.join(known)}"
            )
        for name, spec in datasets.items():
            weight = spec if isinstance(spec, float | int) else spec.weight
            if weight <= 0:
                raise ValueError(f"weight of dataset {name!r} must be > 0, got {weight}")
            if isinstance(spec, ReasoningGymDataset) and {"seed", "size"} & set(spec.config):
                raise ValueError(
                    f"dataset {name!r}: seed and size are set by the environment, not the config"
                )
        return datasets


def registered_datasets() -> list[str]:
    """Every dataset name reasoning-gym registers (except the ``composite`` wrapper)."""
    from reasoning_gym.factory import DATASETS  # imported lazily: importing reasoning-gym takes ~1.5 s

    return sorted(name for name in DATASETS if name != "composite")


class ReasoningGymEnvironment(Environment):
    name: ClassVar[str] = "reasoning_gym"
    prompt_budget_tokens: ClassVar[int] = 2048
    """Le Critique Appendix D.1: an 8,192-token sequence limit with a 6,144-token completion cap."""
    privileged_kinds: ClassVar[tuple[str, ...]] = ("answer",)
    max_action_chars: int = 16_384

    def __init__(self, config: ReasoningGymConfig | None = None) -> None:
        self.config = config or ReasoningGymConfig()
        self._specs = {
            name: spec if isinstance(spec, ReasoningGymDataset) else ReasoningGymDataset(weight=float(spec))
            for name, spec in sorted(self.config.datasets.items())
        }
        self._composites: OrderedDict[int, Any] = OrderedDict()
        self._entries: OrderedDict[tuple[int, int], dict[str, Any]] = OrderedDict()
        # Fail at construction, not at the first sample or score, on a bad dataset config or a
        # dataset the sandbox cannot score.
        composite = self._composite(0)
        self._sandboxed = {
            name: SandboxedScorer(name, spec.config)
            for name, spec in self._specs.items()
            if not scored_in_process(name)
        }
        for name, scorer in self._sandboxed.items():
            scorer.probe(composite.datasets[name], composite.datasets[name][0])
        if self._sandboxed:
            self.answer_sandbox_seconds = SCORING_SANDBOX.wall_seconds

    def sandbox_seconds(self, task: Task) -> float:
        """Only the sandboxed datasets' answers start a sandbox."""
        return SCORING_SANDBOX.wall_seconds if task.metadata.get("dataset") in self._sandboxed else 0.0

    def _composite(self, seed: int) -> Any:
        if seed in self._composites:
            self._composites.move_to_end(seed)
            return self._composites[seed]
        from reasoning_gym.composite import CompositeConfig, CompositeDataset, DatasetSpec

        specs = [DatasetSpec(name, spec.weight, dict(spec.config)) for name, spec in self._specs.items()]
        try:
            composite = CompositeDataset(
                CompositeConfig(size=self.config.chunk_size, seed=seed, datasets=specs)
            )
        except (AssertionError, TypeError, ValueError) as error:
            raise ValueError(f"invalid reasoning-gym dataset config: {error!r}") from None
        self._composites[seed] = composite
        if len(self._composites) > _COMPOSITE_CACHE_SIZE:
            self._composites.popitem(last=False)
        return composite

    def _entry(self, seed: int, index: int) -> dict[str, Any]:
        key = (seed, index)
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        entry: dict[str, Any] = self._composite(seed)[index]
        self._entries[key] = entry
        if len(self._entries) > _ENTRY_CACHE_SIZE:
            self._entries.popitem(last=False)
        return entry

    def _candidate(self, seed: int, position: int) -> tuple[str, Task] | None:
        chunk, index = divmod(position, self.config.chunk_size)
        composite_seed = derive_seed(self.name, seed, chunk) % 2**32
        try:
            entry = self._entry(composite_seed, index)
        except IndexError:  # generators such as word_ladder shrink their virtual size when exhausted
            return None
        source = str(entry["metadata"]["source_dataset"])
        question = str(entry["question"])
        content = f"{source}\n{question}"
        answer = entry.get("answer")
        reference = None if answer is None else str(answer)
        task = Task(
            task_id=task_id(self.name, content),
            prompt=f"{question.rstrip()}\n{ANSWER_INSTRUCTION}\n",
            reference=reference,
            privileged={"answer": reference if reference is not None else NO_REFERENCE},
            metadata={
                "dataset": source,
                "composite_seed": composite_seed,
                "index": index,
                "question_digest": content_digest(question),
            },
        )
        return content, task

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        return sample_split(
            lambda index: self._candidate(seed, index), n, split, self.name, self.config.eval_fraction
        )

    def entry(self, task: Task) -> dict[str, Any]:
        """The reasoning-gym entry behind ``task`` (regenerated if this replica did not sample it)."""
        entry = self._entry(int(task.metadata["composite_seed"]), int(task.metadata["index"]))
        if content_digest(entry["question"]) != task.metadata["question_digest"]:
            raise ValueError(
                f"task {task.task_id} was not sampled under this environment's datasets configuration"
            )
        return entry

    def score(self, task: Task, completion: str) -> ScoreResult:
        prepared = self._prepare(task, completion)
        if isinstance(prepared, ScoreResult):
            return prepared
        name, dataset, answer, entry = prepared
        if name in self._sandboxed:
            result = self._sandboxed[name].score(dataset, answer, entry)
            if not result.ok:
                return ScoreResult(0.0, f"{name} scorer rejected {short(answer)}: {result.error}"[:200])
            reward = float(result.value)
        else:
            try:
                reward = float(dataset.score_answer(answer, entry))
            except Exception as error:  # a dataset's scorer choking on odd text is a wrong answer
                return ScoreResult(0.0, f"{name} scorer rejected {short(answer)}: {error!r}"[:200])
        return self._result(after_scorer(name, reward), "", name, answer)

    def _prepare(self, task: Task, completion: str) -> ScoreResult | tuple[str, Any, str, dict[str, Any]]:
        """A result decided before the dataset's scorer, or what that scorer needs."""
        if isinstance(completion, str) and len(completion) > self.max_action_chars:
            # Before any scorer: a 60,000-character answer reached basic_arithmetic's (issue #46).
            return ScoreResult(0.0, f"answer longer than {self.max_action_chars} characters")
        answer, problem = extract_answer(completion, tags=True)
        if answer is None:
            return ScoreResult(0.0, problem)
        entry = self.entry(task)
        name = str(task.metadata["dataset"])
        dataset = self._composite(int(task.metadata["composite_seed"])).datasets[name]
        decided = before_scorer(name, dataset, answer, entry)
        if decided is not None:
            reward, diagnostic = decided
            return self._result(after_scorer(name, reward), diagnostic, name, answer)
        return name, dataset, answer, entry

    def score_trusted(self, items: list[tuple[Task, str]]) -> list[ScoreResult]:
        """Scores of the platform's own answers (the scorer audit's constants), as :meth:`score`
        gives them, with each sandboxed dataset's answers in one sandbox instead of one each.
        Never for a policy's answers (one could change how the next is scored)."""
        results: list[ScoreResult | None] = [None] * len(items)
        batches: dict[tuple[str, int], list[tuple[int, Any, str, dict[str, Any]]]] = {}
        for position, (task, completion) in enumerate(items):
            prepared = self._prepare(task, completion)
            if isinstance(prepared, ScoreResult):
                results[position] = prepared
                continue
            name, dataset, answer, entry = prepared
            if name not in self._sandboxed:
                results[position] = self.score(task, completion)
                continue
            batches.setdefault((name, id(dataset)), []).append((position, dataset, answer, entry))
        for (name, _), batch in batches.items():
            outcome = self._sandboxed[name].score_trusted(batch[0][1], [(a, e) for _, _, a, e in batch])
            values = outcome.value if outcome.ok and isinstance(outcome.value, list) else [None] * len(batch)
            for (position, _, answer, _), value in zip(batch, values, strict=True):
                if value is None:
                    results[position] = ScoreResult(
                        0.0, f"{name} scorer rejected {short(answer)}: {outcome.error}"[:200]
                    )
                else:
                    results[position] = self._result(after_scorer(name, float(value)), "", name, answer)
        return [result for result in results if result is not None]

    def _result(self, reward: float, diagnostic: str, name: str, answer: str) -> ScoreResult:
        if self.config.binary_reward and reward < 1.0:
            reward = 0.0
        if reward == 1.0:
            return ScoreResult(1.0, "correct")
        return ScoreResult(reward, diagnostic or f"{name} scored {short(answer)} {reward:.3g}")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        if task.reference is None:
            raise ValueError(f"task {task.task_id} ({task.metadata['dataset']}) has no reference answer")
        return Demonstration([(task.prompt, tagged(task.reference))])
