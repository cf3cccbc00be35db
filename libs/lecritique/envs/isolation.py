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

import contextlib
import json
import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lecritique.envs._scoring_worker import encode_frame
from lecritique.envs.base import EpisodeState, ScoreResult, Split, StepResult, Task
from lecritique.envs.config import EnvironmentConfigBase

logger = logging.getLogger(__name__)

_BOOT = (
    "import json, os, sys; sys.path[:0] = json.loads(os.environ.pop('LECRITIQUE_SCORING_PATH')); "
    "from lecritique.envs._scoring_worker import main; main()"
)
_HEADER_BYTES = 4
_SANDBOX_MARGIN_SECONDS = 5.0
_MAX_RESULT_BYTES = 64 * 2**20


class ScoringLimits(BaseModel):
    """How the verifier scores answers: worker processes and the per-answer time limit."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    workers: int = Field(default=2, ge=1, le=64)
    """Preforked scoring processes; at least two keep the verifier answering while one runs out its limit."""
    answer_seconds: float = Field(default=10.0, gt=0.0, le=600.0)
    """Per-answer time limit; past it the answer scores 0 and its worker is killed and replaced."""
    start_seconds: float = Field(default=300.0, gt=0.0)
    """Time a worker may take to start and build the environment (reasoning-gym imports ~1.5 s)."""
    batch_items: int = Field(default=32, ge=1)
    """Most answers sent to one worker in one round trip."""

    @classmethod
    def from_environment(cls, variables: dict[str, str] | None = None) -> ScoringLimits:
        """Limits from ``LECRITIQUE_SCORING_WORKERS`` and ``LECRITIQUE_ANSWER_SECONDS`` (else the defaults)."""
        source = os.environ if variables is None else variables
        settings: dict[str, Any] = {}
        if source.get("LECRITIQUE_SCORING_WORKERS"):
            settings["workers"] = int(source["LECRITIQUE_SCORING_WORKERS"])
        if source.get("LECRITIQUE_ANSWER_SECONDS"):
            settings["answer_seconds"] = float(source["LECRITIQUE_ANSWER_SECONDS"])
        return cls(**settings)


@dataclass(frozen=True)
class Killed:
    """A scorer stopped by the pool: what the verifier counts and logs."""

    reason: str
    """``timeout`` (ran past the per-answer limit) or ``died`` (the worker exited mid-answer)."""
    diagnostic: str
    """The diagnostic the answer was scored 0 with."""


class ScoringError(ValueError):
    """The environment refused an item (a task it did not sample, an episode already done)."""


class _WorkerGone(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _Worker:
    """One scoring process; used by one thread at a time (the pool's idle queue hands it out)."""

    def __init__(self, path: Sequence[str]) -> None:
        environment = dict(os.environ)
        environment["LECRITIQUE_SCORING_PATH"] = json.dumps(list(path))
        # Every worker (of every replica) generates the same tasks: three reasoning-gym datasets
        # (isomorphic_strings, polynomial_multiplication, ransom_note) generate by string hashes.
        environment["PYTHONHASHSEED"] = "0"
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            start_new_session=True,
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._requests = self.process.stdin
        self._results = self.process.stdout.fileno()
        os.set_blocking(self._results, False)
        self._buffer = bytearray()
        self.warm: set[str] = set()
        """Configurations this worker has built."""

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._requests.write(encode_frame(message))
            self._requests.flush()
        except (BrokenPipeError, OSError, ValueError) as error:
            raise _WorkerGone("died", f"the scoring worker is gone ({error})") from None

    def receive(self, seconds: float) -> dict[str, Any]:
        """The next frame, or _WorkerGone when none comes within ``seconds`` or the worker exits."""
        deadline = time.monotonic() + seconds
        while True:
            if len(self._buffer) >= _HEADER_BYTES:
                size = int.from_bytes(self._buffer[:_HEADER_BYTES], "big")
                if size > _MAX_RESULT_BYTES:
                    raise _WorkerGone("died", f"the scoring worker sent a {size}-byte frame")
                if len(self._buffer) >= _HEADER_BYTES + size:
                    payload = bytes(self._buffer[_HEADER_BYTES : _HEADER_BYTES + size])
                    del self._buffer[: _HEADER_BYTES + size]
                    frame: dict[str, Any] = json.loads(payload)
                    return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _WorkerGone("timeout", f"no result within {seconds:g} s")
            readable, _, _ = select.select([self._results], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = os.read(self._results, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                code = self.process.poll()
                raise _WorkerGone("died", f"the scoring worker exited (code {code})")
            self._buffer += chunk

    def kill(self) -> None:
        # The whole session: anything the scorer started goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5.0)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


class ScoringPool:
    """Preforked scoring processes shared by every :class:`IsolatedEnvironment` built on it."""

    def __init__(self, limits: ScoringLimits | None = None, path: Sequence[str] | None = None) -> None:
        self.limits = limits or ScoringLimits()
        self._path = [entry for entry in (sys.path if path is None else path) if entry]
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._workers: set[_Worker] = set()
        self._closed = False
        self._dispatch = ThreadPoolExecutor(
            max_workers=4 * self.limits.workers, thread_name_prefix="scoring-dispatch"
        )
        self.kills = 0
        """Scorers killed since the pool started (timeouts and deaths)."""
        self.restarts = 0
        """Workers started to replace killed ones."""
        for _ in range(self.limits.workers):
            self._add(_Worker(self._path))

    def _add(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                worker.kill()
                return
            self._workers.add(worker)
        self._idle.put(worker)

    def warm(self, config_text: str) -> None:
        """Build ``config_text``'s environment in every worker now (not on its first answer)."""
        workers = [self._acquire() for _ in range(self.limits.workers)]
        try:
            for worker in workers:
                self._warm(worker, config_text)
        finally:
            for worker in workers:
                self._idle.put(worker)

    def _warm(self, worker: _Worker, config_text: str) -> None:
        if config_text in worker.warm:
            return
        worker.send({"op": "warm", "config": config_text})
        try:
            frame = worker.receive(self.limits.start_seconds)
        except _WorkerGone as gone:
            raise RuntimeError(f"a scoring worker could not build the environment: {gone.detail}") from None
        if "setup_error" in frame:
            raise RuntimeError(f"a scoring worker could not build the environment: {frame['setup_error']}")
        worker.warm.add(config_text)

    def _acquire(self) -> _Worker:
        while True:
            if self._closed:
                raise RuntimeError("the scoring pool is closed")
            try:
                return self._idle.get(timeout=1.0)
            except queue.Empty:
                continue

    def _replace(self, worker: _Worker, warm: set[str]) -> None:
        worker.kill()
        with self._lock:
            self._workers.discard(worker)
            self.kills += 1

        def start() -> None:
            while not self._closed:
                fresh = _Worker(self._path)
                try:
                    for config_text in warm:
                        self._warm(fresh, config_text)
                except (RuntimeError, _WorkerGone) as error:
                    fresh.kill()
                    if self._closed:
                        return
                    logger.error("a replacement scoring worker failed to start: %s", error)
                    time.sleep(1.0)
                    continue
                with self._lock:
                    self.restarts += 1
                self._add(fresh)
                return

        threading.Thread(target=start, name="scoring-restart", daemon=True).start()

    def run(
        self, config_text: str, op: str, items: list[dict[str, Any]], seconds: float
    ) -> list[dict[str, Any] | Killed]:
        """Each item's result frame, or :class:`Killed` where its scorer overran or died."""
        size = self.limits.batch_items
        per_worker = -(-len(items) // self.limits.workers) if items else 0
        size = max(1, min(size, per_worker))
        chunks = [items[start : start + size] for start in range(0, len(items), size)]
        futures = [
            self._dispatch.submit(self._run_chunk, config_text, op, chunk, seconds) for chunk in chunks
        ]
        return [outcome for future in futures for outcome in future.result()]

    def _run_chunk(
        self, config_text: str, op: str, items: list[dict[str, Any]], seconds: float
    ) -> list[dict[str, Any] | Killed]:
        outcomes: list[dict[str, Any] | Killed] = []
        while len(outcomes) < len(items):
            pending = items[len(outcomes) :]
            worker = self._acquire()
            try:
                self._warm(worker, config_text)
                worker.send({"op": op, "config": config_text, "items": pending})
                for _ in pending:
                    frame = worker.receive(seconds)
                    if "setup_error" in frame:
                        raise RuntimeError(str(frame["setup_error"]))
                    outcomes.append(frame)
            except _WorkerGone as gone:
                if gone.reason == "timeout":
                    diagnostic = f"the scorer ran past the per-answer limit of {seconds:g} s and was killed"
                else:
                    diagnostic = f"the scorer's process died while scoring this answer ({gone.detail})"
                outcomes.append(Killed(gone.reason, diagnostic))
                self._replace(worker, set(worker.warm))
                continue
            except BaseException:
                self._replace(worker, set(worker.warm))
                raise
            self._idle.put(worker)
        return outcomes

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._workers)
            self._workers.clear()
        for worker in workers:
            worker.kill()
        self._dispatch.shutdown(wait=False, cancel_futures=True)


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
        """The per-answer limit this environment's answers get."""
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
        outcomes = self.pool.run(self._config_text, "score", requests, self.answer_seconds)
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
        outcomes = self.pool.run(self._config_text, "step", requests, self.answer_seconds)
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
