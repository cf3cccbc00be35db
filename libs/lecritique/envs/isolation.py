"""Scoring in killable worker processes: no answer can hold the verifier (issue #46).

A scorer is third-party code on the path of a policy's text, and some take unbounded time on
short answers: math-verify on ``$9^{9^{9}}$`` (its signal timeout works only on a main thread,
and gRPC handlers are worker threads), reasoning-gym's ``coin_flip`` on ``1e99999999``
(``Fraction`` holds the GIL for hours), ``propositional_logic`` on ``'¬'*16000 + 'p'``. No
thread-safe timeout can stop code that holds the GIL or never returns, so (as verl and NeMo-Gym
do) the verifier never scores in its own process:

- :class:`ScoringPool` keeps ``workers`` preforked ``python`` processes
  (:mod:`lecritique.envs._scoring_worker`), each holding the built environment, so the scorer
  modules are imported once and an answer costs one pipe round trip. Items travel in batches
  (a request's answers split across the idle workers); each item has its own deadline, counted
  from the previous item's result.
- An item that overruns its deadline (or whose worker dies) scores 0 with a diagnostic naming
  the limit; its worker's process group is killed with SIGKILL and a fresh worker starts in the
  background; the batch's remaining items go to another worker. The waiting is a ``select``
  on a pipe, so the limit works from any thread, and the other workers keep serving meanwhile.
- :class:`IsolatedEnvironment` is the verifier's view of an environment: sampling and resets in
  the verifier's process (they read no policy text), every ``score`` and ``step`` through the
  pool, and the environment's answer-length limit (``max_action_chars``) applied before any
  scorer sees a single-turn answer.

The per-answer limit is :attr:`ScoringLimits.answer_seconds`, raised to an environment's sandbox
wall clock plus a margin where its scorer starts a sandbox (the sandbox stops its own child at
that wall clock, so a sandboxed answer is never cut short by the pool).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from lecritique.envs.base import EpisodeState, ScoreResult, Split, StepResult, Task
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.scoring_pool import Killed, ScoringPool

logger = logging.getLogger(__name__)

_SANDBOX_MARGIN_SECONDS = 5.0


class ScoringError(ValueError):
    """The environment refused an item (a task it did not sample, an episode already done)."""


def task_to_dict(task: Task) -> dict[str, Any]:
    """``task`` as JSON-ready fields (shallow: ``dataclasses.asdict`` deep-copies, ten times slower)."""
    return {
        "task_id": task.task_id,
        "prompt": task.prompt,
        "reference": task.reference,
        "privileged": task.privileged,
        "metadata": task.metadata,
    }


def state_to_dict(state: EpisodeState) -> dict[str, Any]:
    return {
        "task": task_to_dict(state.task),
        "observation": state.observation,
        "turn": state.turn,
        "done": state.done,
        "data": state.data,
    }


class IsolatedEnvironment:
    """The verifier's view of an environment: every scorer runs in the pool, under its limit."""

    def __init__(
        self,
        environment: Any,
        config: EnvironmentConfigBase,
        pool: ScoringPool,
        on_kill: Callable[[Killed], None] | None = None,
    ) -> None:
        self.environment = environment
        self.pool = pool
        self.on_kill = on_kill
        self._config_text = json.dumps(config.model_dump(mode="json"), sort_keys=True)
        sandbox_seconds = float(getattr(environment, "answer_sandbox_seconds", 0.0) or 0.0)
        self.answer_seconds = max(
            pool.limits.answer_seconds,
            sandbox_seconds + _SANDBOX_MARGIN_SECONDS if sandbox_seconds else 0.0,
        )
        """The longest per-answer limit this environment's answers get (:meth:`limit`: one task's)."""
        pool.warm(self._config_text)

    # ---- read no policy text ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.environment.name)

    @property
    def multi_turn(self) -> bool:
        return bool(self.environment.multi_turn)

    @property
    def max_action_chars(self) -> int:
        return int(self.environment.max_action_chars)

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        """Sampled in a worker too: the process that scores a task regenerates it, and workers
        share one string-hash seed where processes otherwise do not."""
        if split not in ("train", "eval"):
            raise ScoringError(f"split must be 'train' or 'eval', got {split!r}")
        request = {"n": n, "split": split, "seed": seed}
        [outcome] = self.pool.run(self._config_text, "sample", [request], self.pool.limits.start_seconds)
        if isinstance(outcome, Killed):
            raise RuntimeError(f"sampling {n} {split} tasks: {outcome.diagnostic}")
        self._raise_refusal(outcome)
        return [Task(**task) for task in outcome["tasks"]]

    def reset(self, task: Task) -> EpisodeState:
        state: EpisodeState = self.environment.reset(task)
        return state

    # ---- policy text: in the pool ---------------------------------------------------------
    def limit(self, task: Task) -> float:
        """``task``'s per-answer limit: the pool's, or above the wall clock of a sandbox its scorer starts."""
        sandbox = float(self.environment.sandbox_seconds(task) or 0.0)
        return max(self.pool.limits.answer_seconds, sandbox + _SANDBOX_MARGIN_SECONDS if sandbox else 0.0)

    def too_long(self, text: str) -> str | None:
        """Why a single-turn answer is refused before any scorer sees it (None: it is not)."""
        limit = self.max_action_chars
        if len(text) > limit:
            return f"answer of {len(text)} characters is longer than this environment's limit of {limit}"
        return None

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[ScoreResult]:
        results: list[ScoreResult | None] = [None] * len(items)
        sent: list[int] = []
        for position, (_task, completion) in enumerate(items):
            refused = self.too_long(completion)
            if refused is not None:
                results[position] = ScoreResult(0.0, refused)
            else:
                sent.append(position)
        requests = [{"task": task_to_dict(items[p][0]), "completion": items[p][1]} for p in sent]
        limits = [self.limit(items[p][0]) for p in sent]
        outcomes = self.pool.run(self._config_text, "score", requests, limits)
        for position, outcome in zip(sent, outcomes, strict=True):
            results[position] = self._score_result(outcome)
        return [result for result in results if result is not None]

    def score(self, task: Task, completion: str) -> ScoreResult:
        return self.score_many([(task, completion)])[0]

    def score_trusted(self, items: Sequence[tuple[Task, str]]) -> list[ScoreResult]:
        """The platform's own answers (the scorer audit's) in one worker call, which an
        environment may batch (reasoning-gym: one sandbox per dataset); where that call overruns
        the per-answer limit plus a sandbox's, each answer is scored alone under its own limit."""
        if any(self.too_long(completion) for _, completion in items):
            return self.score_many(items)
        request = {"items": [{"task": task_to_dict(task), "completion": text} for task, text in items]}
        seconds = (
            self.answer_seconds
            + _SANDBOX_MARGIN_SECONDS
            + float(getattr(self.environment, "answer_sandbox_seconds", 0.0) or 0.0)
        )
        [outcome] = self.pool.run(self._config_text, "score_trusted", [request], seconds)
        if isinstance(outcome, Killed):
            return self.score_many(items)
        self._raise_refusal(outcome)
        return [ScoreResult(float(reward), str(diagnostic)) for reward, diagnostic in outcome["results"]]

    def step_many(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]:
        results: list[StepResult | None] = [None] * len(items)
        sent: list[int] = []
        for position, (state, action) in enumerate(items):
            refused = None if self.multi_turn else self.too_long(action)
            if refused is not None:
                results[position] = self._ended(state, 0.0, refused)
            else:
                sent.append(position)
        requests = [{"state": state_to_dict(items[p][0]), "action": items[p][1]} for p in sent]
        limits = [self.limit(items[p][0].task) for p in sent]
        outcomes = self.pool.run(self._config_text, "step", requests, limits)
        for position, outcome in zip(sent, outcomes, strict=True):
            state = items[position][0]
            if isinstance(outcome, Killed):
                self._killed(outcome)
                results[position] = self._ended(state, 0.0, outcome.diagnostic)
                continue
            self._raise_refusal(outcome)
            stepped = dict(outcome["state"])
            stepped["task"] = Task(**stepped["task"])
            results[position] = StepResult(
                EpisodeState(**stepped),
                str(outcome["observation"]),
                float(outcome["reward"]),
                bool(outcome["done"]),
                str(outcome["diagnostic"]),
            )
        return [result for result in results if result is not None]

    def step(self, state: EpisodeState, action: str) -> StepResult:
        return self.step_many([(state, action)])[0]

    def _ended(self, state: EpisodeState, reward: float, diagnostic: str) -> StepResult:
        done = EpisodeState(task=state.task, observation="", turn=state.turn + 1, done=True, data=state.data)
        return StepResult(done, "", reward, True, diagnostic)

    def _score_result(self, outcome: dict[str, Any] | Killed) -> ScoreResult:
        if isinstance(outcome, Killed):
            self._killed(outcome)
            return ScoreResult(0.0, outcome.diagnostic)
        self._raise_refusal(outcome)
        return ScoreResult(float(outcome["reward"]), str(outcome["diagnostic"]))

    def _raise_refusal(self, outcome: dict[str, Any]) -> None:
        if "error" in outcome:
            raise ScoringError(str(outcome["error"]))

    def _killed(self, killed: Killed) -> None:
        logger.warning("%s: %s", self.name, killed.diagnostic)
        if self.on_kill is not None:
            self.on_kill(killed)
