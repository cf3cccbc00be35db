"""Preforked, killable scoring processes: the mechanism behind :mod:`lecritique.envs.isolation`.

:class:`ScoringPool` keeps ``workers`` processes (:mod:`lecritique.envs._scoring_worker`) and runs
items on them in batches, each item under its own deadline counted from the previous item's
result; an item past it (or whose worker dies) comes back as :class:`Killed`, its worker's
process group is killed with SIGKILL, a replacement starts in the background and the batch's
remaining items go to another worker. Waiting is a ``select`` on a pipe: it works from any thread.
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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lecritique.envs.scoring_frames import HEADER, encode_frame

logger = logging.getLogger(__name__)

_BOOT = (
    "import json, os, sys; sys.path[:0] = json.loads(os.environ.pop('LECRITIQUE_SCORING_PATH')); "
    "from lecritique.envs._scoring_worker import main; main()"
)
_HEADER_BYTES = HEADER.size
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
            for worker in workers:  # every worker builds at once; then each is waited for
                if config_text not in worker.warm:
                    worker.send({"op": "warm", "config": config_text})
            for worker in workers:
                self._warm(worker, config_text, sent=True)
        finally:
            for worker in workers:
                self._idle.put(worker)

    def _warm(self, worker: _Worker, config_text: str, sent: bool = False) -> None:
        if config_text in worker.warm:
            return
        if not sent:
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
        self, config_text: str, op: str, items: list[dict[str, Any]], seconds: float | Sequence[float]
    ) -> list[dict[str, Any] | Killed]:
        """Each item's result frame, or :class:`Killed` where its scorer overran or died;
        ``seconds``: one limit for every item, or each item's own."""
        limits = (
            [float(seconds)] * len(items) if isinstance(seconds, int | float) else [float(x) for x in seconds]
        )
        if len(limits) != len(items):
            raise ValueError(f"{len(limits)} time limits for {len(items)} items")
        size = self.limits.batch_items
        per_worker = -(-len(items) // self.limits.workers) if items else 0
        size = max(1, min(size, per_worker))
        starts = range(0, len(items), size)
        if len(starts) <= 1:  # one chunk: no hand-off to a dispatch thread
            return self._run_chunk(config_text, op, items, limits) if items else []
        futures = [
            self._dispatch.submit(
                self._run_chunk, config_text, op, items[start : start + size], limits[start : start + size]
            )
            for start in starts
        ]
        return [outcome for future in futures for outcome in future.result()]

    def _run_chunk(
        self, config_text: str, op: str, items: list[dict[str, Any]], limits: list[float]
    ) -> list[dict[str, Any] | Killed]:
        outcomes: list[dict[str, Any] | Killed] = []
        while len(outcomes) < len(items):
            pending = items[len(outcomes) :]
            worker = self._acquire()
            try:
                self._warm(worker, config_text)
                worker.send({"op": op, "config": config_text, "items": pending})
                for _ in pending:
                    frame = worker.receive(limits[len(outcomes)])
                    if "setup_error" in frame:
                        raise RuntimeError(str(frame["setup_error"]))
                    outcomes.append(frame)
            except _WorkerGone as gone:
                limit = limits[len(outcomes)]
                if gone.reason == "timeout":
                    diagnostic = f"the scorer ran past the per-answer limit of {limit:g} s and was killed"
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
