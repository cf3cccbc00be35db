"""The scorer audit: can an answer that ignores the task earn a reward? (issue #46 item 2)

A policy finds a constant that pays within a few hundred steps, and the run then reports
success: ``1*2*3*4`` won every ``puzzle24`` task, ``0`` most ``coin_flip`` tasks, any text every
``game_of_life_halting`` task, ``nan`` every ``complex_arithmetic`` task. The audit scores
degenerate answers over many tasks of an environment (per source dataset for reasoning-gym):

- ``DEGENERATE``: empty, ``0``, ``1``, ``-1``, ``True``, ``False``, ``nan``, ``inf``, ``None``,
  ``[]``, ``yes``, ``no``;
- the longest answer the environment accepts (``x`` repeated to ``max_action_chars``);
- the group's most common reference answer;
- ``TASK_IGNORING``: answers well formed for a dataset that ignore its task (``1*2*3*4``).

Answers are tagged where the environment reads tags, and repeated every turn of a multi-turn
episode. A constant may honestly earn what its share of the references is (``Yes`` on a yes/no
dataset), so an answer **wins** when its mean reward exceeds that share by more than
``WIN_MARGIN``. Every score goes through the verifier's own path (:mod:`lecritique.envs.isolation`
where the caller passes a pool), so a scorer that hangs on a degenerate answer is killed and
shows up as a diagnostic, not as a stuck audit.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Protocol

from lecritique.envs.answers import tagged
from lecritique.envs.base import EpisodeState, ScoreResult, StepResult, Task

DEGENERATE = ("", "0", "1", "-1", "True", "False", "nan", "inf", "None", "[]", "yes", "no")
"""Answers that ignore any task, tried on every environment."""
TASK_IGNORING: dict[str, tuple[str, ...]] = {
    "puzzle24": ("1*2*3*4", "4*6", "(1+2+3)*4", "2*3*4*1"),
    "countdown": ("1+2", "0*1"),
    "coin_flip": ("0.0", "1/2", "0.5"),
    "complex_arithmetic": ("nan+nanj", "inf", "0"),
    "game_of_life_halting": ("maybe",),
    "arithmetic": ("0", "00"),
    "sudoku": ("r1c1=1",),
    "babyai_text": ("go forward", "pick up"),
}
"""Well-formed answers that still ignore the task, per dataset or environment."""
WIN_MARGIN = 0.25
"""An answer wins when its mean reward exceeds its share of the references by more than this."""


class Scoring(Protocol):
    """What the audit needs of an environment (an :class:`~lecritique.envs.base.Environment`, or
    the verifier's :class:`~lecritique.envs.isolation.IsolatedEnvironment`)."""

    name: Any
    multi_turn: Any
    max_action_chars: Any

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[ScoreResult]: ...

    def step_many(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]: ...

    def reset(self, task: Task) -> EpisodeState: ...


class InProcess:
    """An environment scored in this process (where no pool is wanted: tests of one scorer)."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.name = environment.name
        self.multi_turn = environment.multi_turn
        self.max_action_chars = environment.max_action_chars

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[ScoreResult]:
        return [self.environment.score(task, text) for task, text in items]

    def step_many(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]:
        return [self.environment.step(state, text) for state, text in items]

    def reset(self, task: Task) -> EpisodeState:
        state: EpisodeState = self.environment.reset(task)
        return state

    def score_trusted(self, items: Sequence[tuple[Task, str]]) -> list[ScoreResult]:
        trusted = getattr(self.environment, "score_trusted", None)
        if trusted is None:
            return self.score_many(items)
        results: list[ScoreResult] = trusted(list(items))
        return results


@dataclass(frozen=True)
class AuditRow:
    """One dataset (reasoning-gym) or environment: its worst degenerate answer."""

    group: str
    """The reasoning-gym dataset, or the environment's name."""
    tasks: int
    """Tasks each answer was scored on."""
    answers: int
    """Degenerate answers tried."""
    worst_answer: str
    """The answer with the highest mean reward above its share of the references."""
    worst_mean: float
    """Its mean reward."""
    share: float
    """Its share of the tasks' references (what a constant honestly earns)."""
    wins: bool
    """Whether ``worst_mean`` exceeds ``share`` by more than ``WIN_MARGIN``."""
    action: str
    """What the platform does about this dataset's scorer."""
    diagnostic: str
    """A diagnostic of the worst answer (a killed scorer says so here)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def uses_tags(environment: Any) -> bool:
    """Whether the environment reads its answer from ``<answer>`` tags."""
    inner = getattr(environment, "environment", environment)
    if inner.name in ("reasoning_gym", "codeio"):
        return True
    return bool(getattr(getattr(inner, "config", None), "answer_tags", False))


def degenerate_answers(group: str, references: Sequence[str | None], longest: int) -> list[str]:
    """The answers the audit tries on ``group``: constants, the longest, the commonest reference, task-ignoring."""
    answers = list(DEGENERATE)
    answers.append("x" * max(1, longest))
    known = [reference for reference in references if reference is not None]
    if known:
        answers.append(Counter(known).most_common(1)[0][0])
    answers += TASK_IGNORING.get(group.removesuffix(ENVIRONMENT_SUFFIX), ())
    return list(dict.fromkeys(answers))


_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d{1,3})?(/\d+)?")


def same_answer(reference: str | None, answer: str) -> bool:
    """Whether ``answer`` is ``reference`` written the same or as the same number (``0`` and ``0.0``)."""
    if reference is None:
        return False
    left, right = reference.strip().casefold(), answer.strip().casefold()
    if left == right:
        return True
    if _NUMBER.fullmatch(left) and _NUMBER.fullmatch(right):
        try:
            return Fraction(left) == Fraction(right)
        except (ValueError, ZeroDivisionError):
            return False
    return False


ENVIRONMENT_SUFFIX = " (environment)"
"""Marks a row of a whole environment (reasoning-gym's rows are its datasets: both have a countdown)."""


def _group(task: Task, environment_name: str) -> str:
    if environment_name == "reasoning_gym":
        return str(task.metadata.get("dataset", environment_name))
    return environment_name + ENVIRONMENT_SUFFIX


def _play(environment: Scoring, tasks: Sequence[Task], action: str, turns: int) -> list[tuple[float, str]]:
    """Rewards of repeating ``action`` every turn of each task's episode."""
    states = [environment.reset(task) for task in tasks]
    rewards: list[tuple[float, str] | None] = [None] * len(tasks)
    for _ in range(turns):
        live = [index for index, state in enumerate(states) if not state.done and rewards[index] is None]
        if not live:
            break
        stepped = environment.step_many([(states[index], action) for index in live])
        for index, result in zip(live, stepped, strict=True):
            states[index] = result.state
            if result.done:
                rewards[index] = (result.reward, result.diagnostic)
    return [reward if reward is not None else (0.0, "episode not finished") for reward in rewards]


def audit(
    environment: Scoring, tasks: Sequence[Task], actions: dict[str, str] | None = None, max_turns: int = 1
) -> list[AuditRow]:
    """One row per dataset (reasoning-gym) or for the environment, from ``tasks`` of it."""
    by_group: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_group[_group(task, str(environment.name))].append(task)
    tags = uses_tags(environment)
    wrapper_length = len(tagged("")) if tags else 0
    rows = []
    for group in sorted(by_group):
        group_tasks = by_group[group]
        references = [task.reference for task in group_tasks]
        answers = degenerate_answers(group, references, int(environment.max_action_chars) - wrapper_length)
        worst: tuple[float, str, float, float, str] | None = None
        scored: dict[str, list[tuple[float, str]]] = {}
        if environment.multi_turn:
            for answer in answers:
                scored[answer] = _play(environment, group_tasks, answer, max_turns)
        else:
            items = [(task, tagged(answer) if tags else answer) for answer in answers for task in group_tasks]
            # The answers are the audit's own constants: an environment may score them in batches
            # (reasoning-gym: one sandbox per dataset instead of one per answer).
            trusted = getattr(environment, "score_trusted", None)
            results = trusted(items) if trusted is not None else environment.score_many(items)
            for position, answer in enumerate(answers):
                chunk = results[position * len(group_tasks) : (position + 1) * len(group_tasks)]
                scored[answer] = [(result.reward, result.diagnostic) for result in chunk]
        for answer in answers:
            rewards = scored[answer]
            mean = sum(reward for reward, _ in rewards) / len(rewards)
            share = sum(1 for reference in references if same_answer(reference, answer))
            share_fraction = share / len(group_tasks)
            excess = mean - share_fraction
            diagnostic = max(rewards, key=lambda pair: pair[0])[1]
            if worst is None or (excess, mean) > (worst[0], worst[2]):
                worst = (excess, answer, mean, share_fraction, diagnostic)
        assert worst is not None
        excess, answer, mean, share_fraction, diagnostic = worst
        rows.append(
            AuditRow(
                group=group,
                tasks=len(group_tasks),
                answers=len(answers),
                worst_answer=answer,
                worst_mean=round(mean, 3),
                share=round(share_fraction, 3),
                wins=excess > WIN_MARGIN,
                action=(actions or {}).get(group, "none needed"),
                diagnostic=diagnostic[:160],
            )
        )
    return rows


def shown(answer: str, limit: int = 24) -> str:
    """An answer as the table shows it (the longest string as its length)."""
    if len(answer) > limit and set(answer) == {"x"}:
        return f"`x`×{len(answer)}"
    text = answer if len(answer) <= limit else answer[:limit] + "…"
    text = text.replace("|", "\\|").replace("\n", "⏎")
    return f"`{text}`" if text else "(empty)"


def markdown(rows: Sequence[AuditRow]) -> str:
    """The audit as the Markdown table docs/security.md holds."""
    lines = [
        "| dataset | tasks | answers tried | worst answer | its mean reward | its share of references | action |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        verdict = " **(wins)**" if row.wins else ""
        lines.append(
            f"| {row.group} | {row.tasks} | {row.answers} | {shown(row.worst_answer)} | "
            f"{row.worst_mean:.2f}{verdict} | {row.share:.2f} | {row.action} |"
        )
    return "\n".join(lines) + "\n"


def sample_per_group(environment: Any, per_group: int, seed: int = 0, limit: int = 20_000) -> list[Task]:
    """Train tasks until every group has ``per_group`` (or ``limit`` tasks were drawn)."""
    inner = getattr(environment, "environment", environment)
    chosen: dict[str, list[Task]] = defaultdict(list)
    drawn = 0
    groups = getattr(getattr(inner, "config", None), "datasets", None)
    batch = max(16, 2 * per_group * (len(groups) if inner.name == "reasoning_gym" and groups else 1))
    while drawn < limit:
        tasks = inner.sample_tasks(drawn + batch, split="train", seed=seed)[drawn:]
        drawn += batch
        for task in tasks:
            group = _group(task, str(inner.name))
            if len(chosen[group]) < per_group:
                chosen[group].append(task)
        expected = (
            set(groups)
            if inner.name == "reasoning_gym" and groups
            else {str(inner.name) + ENVIRONMENT_SUFFIX}
        )
        if expected <= set(chosen) and all(len(chosen[g]) >= per_group for g in expected):
            break
        if not tasks:
            break
    return [task for group in sorted(chosen) for task in chosen[group]]


def _jobs(config: Any) -> list[tuple[str, Any]]:
    """(group, environment config) per audit job: one per reasoning-gym dataset, else the config."""
    if getattr(config, "kind", None) != "reasoning_gym":
        return [(str(config.kind) + ENVIRONMENT_SUFFIX, config)]
    jobs = []
    for name, spec in sorted(config.datasets.items()):
        single = config.model_copy(
            update={"datasets": {name: spec}, "chunk_size": min(config.chunk_size, 64)}
        )
        jobs.append((name, single))
    return jobs


def actions_for(config: Any) -> dict[str, str]:
    """What the platform does about each group's scorer (the table's last column)."""
    if getattr(config, "kind", None) == "reasoning_gym":
        from lecritique.envs.reasoning_gym_fixes import FIXES

        return {name: f"fixed: {what}" for name, what in FIXES.items()}
    return {}


def audit_config(
    config: Any, pool: Any, per_group: int = 8, seed: int = 0, seconds: float = 600.0
) -> list[AuditRow]:
    """The audit of the environment ``config`` describes, each job in a worker of ``pool``
    (a :class:`~lecritique.envs.isolation.ScoringPool`) under ``seconds``: the worker samples the
    tasks and scores the answers as the verifier would; a job that overruns is killed and its row
    says so."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from lecritique.envs.scoring_pool import Killed

    actions = actions_for(config)

    def run(job: tuple[str, Any]) -> list[AuditRow]:
        group, job_config = job
        text = json.dumps(job_config.model_dump(mode="json"), sort_keys=True)
        request = {"per_group": per_group, "seed": seed, "actions": actions}
        [outcome] = pool.run(text, "audit", [request], seconds)
        if isinstance(outcome, Killed):
            return [
                AuditRow(group, 0, 0, "", 0.0, 0.0, False, "killed by the time limit", outcome.diagnostic)
            ]
        if "error" in outcome:
            raise ValueError(f"auditing {group}: {outcome['error']}")
        return [AuditRow(**row) for row in outcome["rows"]]

    jobs = _jobs(config)
    with ThreadPoolExecutor(max(1, pool.limits.workers)) as executor:
        rows = [row for found in executor.map(run, jobs) for row in found]
    return sorted(rows, key=lambda row: row.group)
