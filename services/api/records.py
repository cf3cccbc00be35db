"""Experiment records in Redis: what was submitted, by whom, and where it stands.

Keys (all under ``lecritique:api:``):

* ``experiment:{id}``: the record as JSON.
* ``tenant:{tenant}``: sorted set of the tenant's experiment ids by submission time.
* ``active``: set of ids not yet in a final state (what the reconciler polls).
* ``running:{tenant}``: the same, per tenant (what the running-experiments quota counts).
* ``idempotency:{tenant}:{sha256(key)}``: ``{"fingerprint", "id"}`` of a POST made with that
  ``Idempotency-Key``, kept for :data:`IDEMPOTENCY_TTL_SECONDS`.

A submission is recorded by one Lua script (:data:`CREATE_LUA`): it looks the idempotency key up,
checks the tenant's running quota, and writes the record, its indexes and the key together. There
is no moment at which a key exists without its record, so an API process killed at any point
leaves either nothing (the client's retry creates the experiment) or a ``pending`` record that the
key replays and the reconciler launches.

The orchestrator of each experiment writes ``lecritique:{id}:metrics`` (a list of JSON rows) and
``lecritique:{id}:status`` (a hash with ``step``, ``policy_version``); the API only reads those.
Status changes are compare-and-set transactions, so a cancel and a completion seen by the
reconciler at the same moment cannot overwrite each other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

import redis
from pydantic import Field

from lecritique.client.models import FINAL_STATES, ExperimentFields

logger = logging.getLogger(__name__)

IDEMPOTENCY_TTL_SECONDS = 24 * 3600
_PREFIX = "lecritique:api"


class ExperimentRecord(ExperimentFields):
    """One submitted experiment: the fields its tenant sees (:class:`ExperimentFields`; the id names
    Kubernetes objects, Redis keys and metric labels; only the owner's token reads or cancels it)
    and what only the API keeps."""

    spec: dict[str, Any]
    """The validated spec, with every default filled in."""
    handle: dict[str, Any] = Field(default_factory=dict)
    """Launcher bookkeeping (process ids, namespace) needed to poll and cancel it."""

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATES


class IdempotencyConflict(Exception):
    """The Idempotency-Key was used before with a different request body."""


class QuotaExceeded(Exception):
    """The tenant already runs as many experiments as its policy allows."""

    def __init__(self, running: int, limit: int) -> None:
        super().__init__(f"{running} experiments running; this tenant's limit is {limit}")
        self.running = running
        self.limit = limit


CREATE_LUA = """
local fingerprint = ARGV[5]
if fingerprint ~= '' then
  local previous = redis.call('GET', KEYS[5])
  if previous then
    local stored = cjson.decode(previous)
    if stored['fingerprint'] ~= fingerprint then return {'conflict', ''} end
    return {'replay', stored['id']}
  end
end
local running = redis.call('SCARD', KEYS[4])
if running >= tonumber(ARGV[4]) then return {'quota', tostring(running)} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[2])
if fingerprint ~= '' then
  redis.call('SET', KEYS[5], cjson.encode({fingerprint = fingerprint, id = ARGV[2]}), 'EX', tonumber(ARGV[6]))
end
return {'created', ARGV[2]}
"""
"""Idempotency lookup, running quota and the record's writes as one atomic step (see the module docstring)."""


def fingerprint(body: Any) -> str:
    """Hash of a request body that ignores key order and whitespace."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class RecordStore:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._create = client.register_script(CREATE_LUA)

    # ---- keys ------------------------------------------------------------------------------
    @staticmethod
    def _record_key(experiment_id: str) -> str:
        return f"{_PREFIX}:experiment:{experiment_id}"

    @staticmethod
    def _tenant_key(tenant: str) -> str:
        return f"{_PREFIX}:tenant:{tenant}"

    @staticmethod
    def _active_key() -> str:
        return f"{_PREFIX}:active"

    @staticmethod
    def _idempotency_key(tenant: str, key: str) -> str:
        return f"{_PREFIX}:idempotency:{tenant}:{hashlib.sha256(key.encode()).hexdigest()}"

    @staticmethod
    def _running_key(tenant: str) -> str:
        return f"{_PREFIX}:running:{tenant}"

    # ---- records ---------------------------------------------------------------------------
    def create(
        self,
        record: ExperimentRecord,
        *,
        max_running: int,
        idempotency_key: str | None = None,
        body_fingerprint: str = "",
    ) -> str | None:
        """Record a new submission atomically; returns None if created, else the id an earlier
        request with the same ``idempotency_key`` created (a replay).

        Raises :class:`IdempotencyConflict` (the key was used with another body) or
        :class:`QuotaExceeded` (``max_running`` experiments of the tenant are not finished).
        """
        idempotency = (
            self._idempotency_key(record.tenant, idempotency_key)
            if idempotency_key is not None
            else f"{_PREFIX}:unused"
        )
        keys = [
            self._record_key(record.id),
            self._tenant_key(record.tenant),
            self._active_key(),
            self._running_key(record.tenant),
            idempotency,
        ]
        args = [
            record.model_dump_json(),
            record.id,
            record.created_at,
            max_running,
            body_fingerprint if idempotency_key is not None else "",
            IDEMPOTENCY_TTL_SECONDS,
        ]
        outcome, value = (
            part.decode() if isinstance(part, bytes) else str(part)
            for part in self._create(keys=keys, args=args)
        )
        if outcome == "conflict":
            raise IdempotencyConflict(idempotency_key)
        if outcome == "quota":
            raise QuotaExceeded(int(value), max_running)
        return value if outcome == "replay" else None

    def rebuild_running_sets(self) -> None:
        """Put every active record in its tenant's running set (records written before the sets existed)."""
        for experiment_id in self.active_ids():
            record = self.get(experiment_id)
            if record is not None and not record.final:
                self.redis.sadd(self._running_key(record.tenant), record.id)

    def get(self, experiment_id: str) -> ExperimentRecord | None:
        raw = self.redis.get(self._record_key(experiment_id))
        return None if raw is None else ExperimentRecord.model_validate_json(raw)

    def list_for_tenant(self, tenant: str, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        """Newest first (``limit`` and ``offset`` are bounded by the route)."""
        ids = self.redis.zrevrange(self._tenant_key(tenant), offset, offset + limit - 1)
        records = [self.get(i.decode() if isinstance(i, bytes) else str(i)) for i in ids]
        return [r for r in records if r is not None]

    def active_ids(self) -> list[str]:
        return sorted(
            m.decode() if isinstance(m, bytes) else str(m) for m in self.redis.smembers(self._active_key())
        )

    def update(
        self, experiment_id: str, *, expect: Iterable[str] | None = None, **changes: Any
    ) -> ExperimentRecord | None:
        """Apply ``changes`` if the record's status is in ``expect`` (any when None); returns the new
        record, or None when the status had moved on (nothing written)."""
        key = self._record_key(experiment_id)
        allowed = None if expect is None else frozenset(expect)
        result: list[ExperimentRecord | None] = [None]

        def transaction(pipe: Any) -> None:
            raw = pipe.get(key)
            if raw is None:
                raise KeyError(experiment_id)
            record = ExperimentRecord.model_validate_json(raw)
            if allowed is not None and record.status not in allowed:
                result[0] = None
                return
            updated = record.model_copy(update={**changes, "updated_at": time.time()})
            ExperimentRecord.model_validate(updated.model_dump())
            pipe.multi()
            pipe.set(key, updated.model_dump_json())
            if updated.final:
                pipe.srem(self._active_key(), experiment_id)
                pipe.srem(self._running_key(updated.tenant), experiment_id)
            else:
                pipe.sadd(self._active_key(), experiment_id)
            result[0] = updated

        self.redis.transaction(transaction, key)
        return result[0]

    # ---- what the orchestrator writes ------------------------------------------------------
    def metrics(self, experiment_id: str, since_step: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """The experiment's per-step metrics rows, oldest first (only steps > since_step), and how
        many rows were skipped as malformed (:func:`metrics_row`)."""
        raws = self.redis.lrange(f"lecritique:{experiment_id}:metrics", 0, -1)
        rows = [row for row in (metrics_row(raw) for raw in raws) if row is not None]
        skipped = len(raws) - len(rows)
        if skipped:
            logger.warning("experiment %s: %d malformed metrics rows skipped", experiment_id, skipped)
        if since_step is not None:
            rows = [row for row in rows if row.get("step", 0) > since_step]
        return rows, skipped

    def latest_metrics(self, experiment_id: str) -> dict[str, Any] | None:
        """The last well-formed row among the last :data:`LATEST_ROWS_SCANNED` (None: none)."""
        raws = self.redis.lrange(f"lecritique:{experiment_id}:metrics", -LATEST_ROWS_SCANNED, -1)
        for raw in reversed(raws):
            row = metrics_row(raw)
            if row is not None:
                return row
        if raws:
            logger.warning("experiment %s: the last %d metrics rows are malformed", experiment_id, len(raws))
        return None

    def progress(self, experiment_id: str) -> dict[str, int]:
        """``step`` and ``policy_version`` as the orchestrator last reported them (a value that is not
        a finite number is skipped)."""
        raw = self.redis.hgetall(f"lecritique:{experiment_id}:status")
        out: dict[str, int] = {}
        for key, value in raw.items():
            name = key.decode() if isinstance(key, bytes) else str(key)
            try:
                out[name] = int(float(value))
            except (ValueError, OverflowError):
                continue
        return out


LATEST_ROWS_SCANNED = 16
"""Rows read back from the end of a series for its latest well-formed one."""


def _no_constant(name: str) -> None:
    return None  # NaN and Infinity: JSON responses cannot hold them


def metrics_row(raw: bytes | str) -> dict[str, Any] | None:
    """One metrics row as JSON data, or None when it is not a JSON object whose ``step`` (if any) is
    an integer: an experiment's process writes these rows, so a malformed one is skipped (and
    counted), never an error of the tenant's request. NaN and infinities become null."""
    try:
        row = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict):
        return None
    step = row.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    return row
