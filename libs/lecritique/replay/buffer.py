"""The critic's replay buffer (Le Critique, Appendix B.2) as a Redis stream shared by processes.

Trajectories enter after the value evaluator scored them (``push``), leave FIFO when the buffer
is over capacity, are sampled uniformly without replacement (``sample``), and are evicted the
moment they have been sampled ``max_reuse`` times or once they are more than
``max_age_versions`` policy versions old.

Why Lua scripts rather than MULTI/WATCH: every ``sample`` mutates shared state (the use counters)
that every other sampler reads, so optimistic WATCH transactions would abort and retry constantly
as soon as several value-trainer replicas sample one stream, and each try costs extra round
trips (read candidates, WATCH them, read again, MULTI/EXEC). A script runs atomically on the
server in one round trip with no aborts, so "never returned more than ``max_reuse`` times" holds
by construction however many processes sample, and Redis writes a script's effects to the AOF as
one MULTI/EXEC block, so the state after a restart is one the scripts produced. The costs: a
script blocks the server while it runs (ours are O(n log depth) for n sampled entries), and
Redis 6.2 does not roll back a script that fails half way, so the scripts check everything that
could fail (key types, settings) before their first write, and the client validates payloads
before sending them. The scripts are in :mod:`lecritique.replay.scripts`.

Durability and retries: ``push`` returns ids only from Redis's reply to the script, i.e. after
Redis applied and AOF-logged the entries (fsynced before the reply with ``appendfsync always``,
within a second with ``everysec``). Connection errors are retried with backoff (see
:mod:`lecritique.redis_reconnect`); a push carries a token so that a retry after a lost reply
returns the first push's ids instead of storing the entries twice. A ``sample`` whose reply is
lost has still used those entries once: the reuse bound is never exceeded, but those uses are
wasted.
"""

from __future__ import annotations

import logging
import re
import secrets
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar, cast, overload

import redis

from lecritique.redis_connection import RetryPolicy, call_with_reconnect
from lecritique.replay import metrics, scripts
from lecritique.replay.config import ReplayConfig
from lecritique.replay.records import (
    ReplayConfigError,
    ReplayEntry,
    ReplayKeys,
    ReplayStats,
    non_negative_int,
    payload_bytes,
    sample_records,
    text,
)

logger = logging.getLogger(__name__)

P = TypeVar("P")

_EVICTION_REASONS = ("capacity", "reuse", "age")
_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_ERROR_PREFIX = "LECRITIQUE "


_DEFAULTS = ReplayConfig(experiment="defaults")
"""The configuration's defaults, which the keyword constructor shares (said once, in ReplayConfig)."""


class ReplayBuffer(Generic[P]):
    """FIFO replay buffer with reuse and age bounds, enforced atomically in Redis.

    ``decode`` (e.g. ``Trajectory.from_bytes``) turns payload bytes into what ``sample`` returns;
    without it ``sample`` returns bytes. ``reconfigure=True`` overwrites settings stored by an
    earlier client of the same experiment instead of raising :class:`ReplayConfigError`.
    """

    @overload
    def __init__(
        self: ReplayBuffer[bytes],
        redis_client: redis.Redis,
        experiment: str,
        capacity: int = ...,
        max_reuse: int = ...,
        max_age_versions: int | None = ...,
        *,
        max_payload_bytes: int = ...,
        retry: RetryPolicy | None = ...,
        decode: None = ...,
        reconfigure: bool = ...,
        idempotency_ttl_s: int = ...,
    ) -> None: ...

    @overload
    def __init__(
        self,
        redis_client: redis.Redis,
        experiment: str,
        capacity: int = ...,
        max_reuse: int = ...,
        max_age_versions: int | None = ...,
        *,
        max_payload_bytes: int = ...,
        retry: RetryPolicy | None = ...,
        decode: Callable[[bytes], P],
        reconfigure: bool = ...,
        idempotency_ttl_s: int = ...,
    ) -> None: ...

    def __init__(
        self,
        redis_client: redis.Redis,
        experiment: str,
        capacity: int = _DEFAULTS.capacity,
        max_reuse: int = _DEFAULTS.max_reuse,
        max_age_versions: int | None = _DEFAULTS.max_age_versions,
        *,
        max_payload_bytes: int = _DEFAULTS.max_payload_bytes,
        retry: RetryPolicy | None = None,
        decode: Callable[[bytes], P] | None = None,
        reconfigure: bool = False,
        idempotency_ttl_s: int = 600,
    ) -> None:
        config = ReplayConfig(
            experiment=experiment,
            capacity=capacity,
            max_reuse=max_reuse,
            max_age_versions=max_age_versions,
            max_payload_bytes=max_payload_bytes,
            retry=retry or RetryPolicy(),
        )
        self._setup(redis_client, config, decode, reconfigure, idempotency_ttl_s)

    def _setup(
        self,
        redis_client: redis.Redis,
        config: ReplayConfig,
        decode: Callable[[bytes], P] | None,
        reconfigure: bool,
        idempotency_ttl_s: int,
    ) -> None:
        if not isinstance(redis_client, redis.Redis):
            raise TypeError(
                f"redis_client must be a redis.Redis (see connect_redis), got {type(redis_client).__name__}"
            )
        if idempotency_ttl_s < 1:
            raise ValueError(f"idempotency_ttl_s must be >= 1, got {idempotency_ttl_s}")
        self.config = config
        self.keys = ReplayKeys.for_experiment(config.experiment)
        self._redis = redis_client
        self._decode = decode
        self._idempotency_ttl_s = idempotency_ttl_s
        self._settings = [
            str(config.capacity),
            str(config.max_reuse),
            str(-1 if config.max_age_versions is None else config.max_age_versions),
        ]
        self._push_script = redis_client.register_script(scripts.PUSH)
        self._sample_script = redis_client.register_script(scripts.SAMPLE)
        labels = {"experiment": config.experiment}
        self._depth_gauge = metrics.DEPTH.labels(**labels)
        self._pushed = metrics.PUSHED.labels(**labels)
        self._sampled = metrics.SAMPLED.labels(**labels)
        self._evictions = {
            reason: metrics.EVICTIONS.labels(reason=reason, **labels) for reason in _EVICTION_REASONS
        }
        self._uses_at_eviction = {
            reason: metrics.USES_AT_EVICTION.labels(reason=reason, **labels) for reason in _EVICTION_REASONS
        }
        self._sample_age = metrics.SAMPLE_AGE.labels(**labels)
        self._reuse_count = metrics.REUSE_COUNT.labels(**labels)
        self._retries = metrics.REDIS_RETRIES.labels(**labels)
        self._seconds = {
            operation: metrics.OPERATION_SECONDS.labels(operation=operation, **labels)
            for operation in ("push", "sample", "stats")
        }
        source = scripts.RECONFIGURE if reconfigure else scripts.CONFIGURE
        configure = redis_client.register_script(source)
        self._call(lambda: configure(keys=self.keys.script_keys(), args=self._settings), "configure")

    @property
    def experiment(self) -> str:
        return self.config.experiment

    # -- writes -------------------------------------------------------------------------------

    def push(
        self,
        payloads: Iterable[object],
        policy_version: int | Iterable[int],
        *,
        idempotency_key: str | None = None,
    ) -> list[str]:
        """Append entries (bytes, or objects with ``to_bytes()``); returns their ids in order.

        ``policy_version`` is one version for all entries or one per entry. Everything is
        validated before anything is sent, so bad input leaves the buffer unchanged. The ids are
        returned only after Redis acknowledged the write; a push repeated with the same
        ``idempotency_key`` within ``idempotency_ttl_s`` returns the first push's ids and stores
        nothing. Entries beyond capacity evict the oldest, possibly ones of this very push.
        """
        encoded = self._encode_payloads(payloads)
        versions = self._policy_versions(policy_version, len(encoded))
        if idempotency_key is not None and (
            not isinstance(idempotency_key, str) or not _IDEMPOTENCY_KEY.match(idempotency_key)
        ):
            raise ValueError(
                f"idempotency_key {idempotency_key!r} must be 1-128 characters of letters, digits, '_', '.', '-'"
            )
        if not encoded:
            return []
        token = idempotency_key or uuid.uuid4().hex
        args: list[Any] = [*self._settings, len(encoded), self._idempotency_ttl_s]
        for version, data in zip(versions, encoded, strict=True):
            args.append(version)
            args.append(data)
        keys = [*self.keys.script_keys(), self.keys.push_token(token)]
        with self._seconds["push"].time():
            ids_raw, evicted_uses, depth, duplicate = self._call(
                lambda: self._push_script(keys=keys, args=args), "push"
            )
        ids = [text(entry_id) for entry_id in ids_raw]
        self._depth_gauge.set(depth)
        if duplicate:
            logger.info(
                "Replay push %s for experiment %r was already stored; returning its ids",
                token,
                self.experiment,
            )
            if idempotency_key is None:
                # Only our own retry can repeat a generated token: the first attempt stored the
                # entries but its reply was lost, so this call is the one that reports them.
                self._pushed.inc(len(ids))
            return ids
        self._pushed.inc(len(ids))
        self._record_evictions("capacity", evicted_uses)
        return ids

    def _encode_payloads(self, payloads: Iterable[object]) -> list[bytes]:
        if isinstance(payloads, (bytes, bytearray, memoryview, str)) or not isinstance(payloads, Iterable):
            raise TypeError(
                f"push expects a sequence of payloads, got {type(payloads).__name__}; "
                "wrap a single payload in a list"
            )
        encoded: list[bytes] = []
        for index, payload in enumerate(payloads):
            data = payload_bytes(payload, index)
            if len(data) > self.config.max_payload_bytes:
                raise ValueError(
                    f"payload {index} is {len(data)} bytes, over max_payload_bytes={self.config.max_payload_bytes}; "
                    "nothing was pushed"
                )
            encoded.append(data)
        return encoded

    @staticmethod
    def _policy_versions(policy_version: int | Iterable[int], count: int) -> list[int]:
        # One version per entry may come as a list, tuple or numpy array.
        if isinstance(policy_version, Iterable) and not isinstance(policy_version, (str, bytes)):
            versions = list(policy_version)
            if len(versions) != count:
                raise ValueError(f"policy_version has {len(versions)} entries for {count} payloads")
            return [
                non_negative_int(value, f"policy_version[{index}]") for index, value in enumerate(versions)
            ]
        return [non_negative_int(policy_version, "policy_version")] * count

    # -- reads --------------------------------------------------------------------------------

    def sample(self, n: int, current_policy_version: int | None = None) -> list[ReplayEntry[P]]:
        """Up to ``n`` distinct entries drawn uniformly from the eligible ones.

        Each returned entry's use counter is incremented; an entry is evicted the moment it
        reaches ``max_reuse``. With ``max_age_versions`` set, ``current_policy_version`` is
        required and older entries are evicted first (never returned). Returns fewer than
        ``n`` entries (possibly none) when fewer are held.
        """
        count = non_negative_int(n, "n")
        if current_policy_version is not None:
            current_policy_version = non_negative_int(current_policy_version, "current_policy_version")
        elif self.config.max_age_versions is not None:
            raise ValueError(
                f"current_policy_version is required: experiment {self.experiment!r} has "
                f"max_age_versions={self.config.max_age_versions}"
            )
        return self._sample(count, current_policy_version)

    def _sample(self, count: int, current_policy_version: int | None) -> list[ReplayEntry[P]]:
        current = "" if current_policy_version is None else str(current_policy_version)
        args: list[str | int] = [*self._settings, count, current, secrets.randbits(31)]
        keys = self.keys.script_keys()
        with self._seconds["sample"].time():
            records, age_uses, reuse_evicted, depth = self._call(
                lambda: self._sample_script(keys=keys, args=args), "sample"
            )
        self._depth_gauge.set(depth)
        self._record_evictions("age", age_uses)
        self._record_evictions("reuse", [self.config.max_reuse] * reuse_evicted)
        entries: list[ReplayEntry[P]] = []
        for entry_id, used, version, payload in sample_records(records):
            if current_policy_version is not None:
                self._sample_age.observe(current_policy_version - version)
            self._reuse_count.observe(used)
            # Without a decoder P is bytes (see the __init__ overloads).
            decoded = self._decode(payload) if self._decode is not None else cast(P, payload)
            entries.append(ReplayEntry(entry_id, decoded, used))
        self._sampled.inc(len(entries))
        return entries

    def stats(self) -> ReplayStats:
        """A snapshot taken in one MULTI/EXEC (consistent across keys)."""

        def read() -> list[Any]:
            pipe = self._redis.pipeline(transaction=True)
            pipe.xlen(self.keys.stream)
            pipe.hgetall(self.keys.stats)
            pipe.zrange(self.keys.index, 0, 0, withscores=True)
            pipe.zrange(self.keys.index, -1, -1, withscores=True)
            pipe.hvals(self.keys.uses)
            return pipe.execute()

        with self._seconds["stats"].time():
            depth, totals_raw, oldest, newest, uses = self._call(read, "stats")
        totals = {text(name): int(value) for name, value in totals_raw.items()}
        histogram: dict[int, int] = {}
        for value in uses:
            histogram[int(value)] = histogram.get(int(value), 0) + 1
        never_used = depth - len(uses)
        if never_used:
            histogram[0] = never_used
        self._depth_gauge.set(depth)
        return ReplayStats(
            depth=depth,
            evicted_by_reason={reason: totals.get(f"evicted_{reason}", 0) for reason in _EVICTION_REASONS},
            oldest_version=int(oldest[0][1]) if oldest else None,
            newest_version=int(newest[0][1]) if newest else None,
            reuse_histogram=dict(sorted(histogram.items())),
            pushed_total=totals.get("pushed", 0),
            sampled_total=totals.get("sampled", 0),
        )

    def __len__(self) -> int:
        return int(self._call(lambda: self._redis.xlen(self.keys.stream), "depth"))

    def clear(self) -> None:
        """Delete every entry, counter, total and the stored settings of this experiment."""
        keys = self.keys.script_keys()
        self._call(lambda: self._redis.delete(*keys), "clear")
        self._depth_gauge.set(0)

    # -- helpers ------------------------------------------------------------------------------

    def _call(self, operation: Callable[[], Any], what: str) -> Any:
        try:
            return call_with_reconnect(
                operation,
                client=self._redis,
                policy=self.config.retry,
                what=f"replay {what} (experiment {self.experiment!r})",
                on_retry=self._retries.inc,
            )
        except redis.ResponseError as error:
            message = str(error)
            if _ERROR_PREFIX in message:
                detail = message.split(_ERROR_PREFIX, 1)[1]
                raise ReplayConfigError(
                    f"replay buffer of experiment {self.experiment!r}: {detail} "
                    "(construct the buffer with reconfigure=True to overwrite the stored settings)"
                ) from error
            raise

    def _record_evictions(self, reason: str, uses: Sequence[int]) -> None:
        if not uses:
            return
        self._evictions[reason].inc(len(uses))
        histogram = self._uses_at_eviction[reason]
        for count in uses:
            histogram.observe(count)
