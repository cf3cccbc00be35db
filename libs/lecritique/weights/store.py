"""Versioned weight store: ``{root}/{role}/{version:08d}/`` directories published atomically.

Layout of one role (e.g. ``policy`` or ``value``)::

    {root}/{role}/
        00000000/          a complete HF-style model directory (config, safetensors, tokenizer)
        00000001/
        LATEST             text file holding the newest version number ("1\\n")
        .lock              flock(2) target that serialises publishers of this role
        .tmp-<random>/     a version being written (never visible under a version name)
        .pins/<holder>     a version some reader still needs (e.g. the critic a policy step used):
                           :meth:`WeightStore.prune` never deletes a pinned version

A version directory appears only through ``rename(2)`` of a fully written temporary directory in
the same folder, so a reader never sees a half-written version. Publishers take an exclusive
lock only for the short commit step (choose the next number, rename, update ``LATEST``); the
write itself happens outside the lock, so two trainers publishing at once never block each other
while serialising safetensors. Versions only ever increase. When a Redis client is given, the
committed version is also announced under ``lecritique:{experiment}:weights:{role}:latest``
(monotonically: an older announcement never overwrites a newer one).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_VERSION_DIGITS = 8
_VERSION_PATTERN = re.compile(r"^\d{8,}$")
_ROLE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_LATEST = "LATEST"
_LOCK = ".lock"
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
_PINS = ".pins"
_STALE_TMP_SECONDS = 3600.0

# Sets the key only when the new version is greater than the stored one, atomically.
_ANNOUNCE_MAX_LUA = """
local current = redis.call('GET', KEYS[1])
if (not current) or (tonumber(current) < tonumber(ARGV[1])) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
"""

WriteFn = Callable[[Path], Any]
"""Writes a complete model directory into the path it is given (e.g. ``model.save_pretrained``)."""


def version_dirname(version: int) -> str:
    """Directory name of ``version``: zero-padded so lexical and numeric order agree."""
    return f"{version:0{_VERSION_DIGITS}d}"


class WeightStore:
    """Publish and find versioned model directories under ``root``."""

    def __init__(self, root: str | Path, redis: Any = None, experiment: str | None = None) -> None:
        self.root = Path(root)
        self.redis = redis
        self.experiment = experiment
        if redis is not None and not experiment:
            raise ValueError("experiment is required when a redis client is given (it names the redis key)")
        self.root.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- reading

    def role_dir(self, role: str) -> Path:
        if not _ROLE_PATTERN.match(role):
            raise ValueError(f"invalid role {role!r}: use letters, digits, '_', '-', '.'")
        return self.root / role

    def path(self, role: str, version: int) -> Path:
        """Directory of ``version`` (whether or not it exists)."""
        if version < 0:
            raise ValueError(f"version must be >= 0, got {version}")
        return self.role_dir(role) / version_dirname(version)

    def versions(self, role: str) -> list[int]:
        """Committed versions of ``role``, ascending."""
        folder = self.role_dir(role)
        if not folder.is_dir():
            return []
        return sorted(int(entry.name) for entry in folder.iterdir() if _VERSION_PATTERN.match(entry.name))

    def latest(self, role: str) -> tuple[int, Path] | None:
        """The newest committed ``(version, path)`` of ``role``, or None before the first publish."""
        folder = self.role_dir(role)
        try:
            version = int((folder / _LATEST).read_text().strip())
        except FileNotFoundError:
            # A crash between the rename and the pointer update leaves a committed version without
            # a pointer; the directory listing is the source of truth in that case.
            found = self.versions(role)
            if not found:
                return None
            version = found[-1]
        else:
            found = self.versions(role)
            if found and found[-1] > version:
                version = found[-1]
        return version, self.path(role, version)

    def wait_latest(
        self, role: str, timeout: float | None = None, poll_seconds: float = 0.2
    ) -> tuple[int, Path]:
        """Block until ``role`` has a version (e.g. a server started before the first publish)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = self.latest(role)
            if found is not None:
                return found
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no version of {role!r} was published in {self.root} within {timeout:.1f} s"
                )
            time.sleep(poll_seconds)

    def announced(self, role: str) -> int | None:
        """The newest version announced in Redis, or None (no client or nothing announced)."""
        if self.redis is None:
            return None
        raw = self.redis.get(self.redis_key(role))
        return None if raw is None else int(raw)

    def redis_key(self, role: str) -> str:
        return f"lecritique:{self.experiment}:weights:{role}:latest"

    # ---------------------------------------------------------------- writing

    def publish(
        self,
        role: str,
        source: WriteFn | str | Path,
        version: int | None = None,
        keep_last: int | None = None,
    ) -> int:
        """Publish a new version of ``role`` and return its number.

        ``source`` is either a function that writes the model into the directory it is given, or
        an existing directory whose contents are copied. ``version`` (optional) requests a
        specific number, which must exceed every committed version; by default the next number
        after the newest (0 for the first). ``keep_last`` prunes older versions afterwards.
        """
        folder = self.role_dir(role)
        folder.mkdir(parents=True, exist_ok=True)
        if version is not None and version < 0:
            raise ValueError(f"version must be >= 0, got {version}")
        staging = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=folder))
        # mkdtemp creates 0700; readers (other services, other pod users) need to list it.
        staging.chmod(0o755)
        try:
            if callable(source):
                source(staging)
            else:
                source_dir = Path(source)
                if not source_dir.is_dir():
                    raise FileNotFoundError(f"source directory {source_dir} does not exist")
                shutil.copytree(source_dir, staging, dirs_exist_ok=True)
            if not any(staging.iterdir()):
                raise ValueError(f"publishing {role!r}: the writer produced an empty directory")
            fsync_tree(staging)
            with self._locked(role):
                committed = self.versions(role)
                newest = committed[-1] if committed else -1
                if version is None:
                    chosen = newest + 1
                elif version <= newest:
                    raise ValueError(
                        f"version {version} of {role!r} is not newer than the committed version {newest}"
                    )
                else:
                    chosen = version
                target = self.path(role, chosen)
                # rename(2) of a directory fails if the target exists and is non-empty, so even a
                # publisher that ignored the lock could not overwrite a committed version.
                os.rename(staging, target)
                _fsync_dir(folder)
                self._write_latest(folder, chosen)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        logger.info("published %s version %d at %s", role, chosen, target)
        self.announce(role, chosen)
        if keep_last is not None:
            self.prune(role, keep_last)
        return chosen

    def announce(self, role: str, version: int) -> None:
        """Announce ``version`` in Redis (if a client was given), never lowering the announced one.

        :meth:`publish` does it; a broadcast transport calls it for versions it does not write.
        Best effort: the store on disk is the source of truth (``LATEST``), and a publish must not
        fail because Redis is restarting.
        """
        if self.redis is None:
            return
        # Imported here: a store without a client (the GPU scripts on a bare image) needs no redis.
        from redis import exceptions as redis_errors

        try:
            self.redis.eval(_ANNOUNCE_MAX_LUA, 1, self.redis_key(role), version)
        except (redis_errors.ConnectionError, redis_errors.TimeoutError) as error:
            logger.warning(
                "could not announce %s version %d in Redis (%s); it is committed on disk",
                role,
                version,
                error,
            )

    def pin(self, role: str, version: int, holder: str) -> bool:
        """Keep ``version`` of ``role`` from pruning for ``holder`` (one pin per holder: a new pin
        replaces its previous one). False when the version is not (or no longer) in the store.

        Retention alone cannot promise a reader its version: a trainer that publishes more than
        ``keep_last`` versions while the reader is busy (the critic a policy step used, during the
        final held-out evaluation) prunes it. Taken under the role's lock, so a pin either lands
        before a prune sees the versions or finds its version already gone."""
        if not _ROLE_PATTERN.match(holder):
            raise ValueError(f"invalid pin holder {holder!r}: use letters, digits, '_', '-', '.'")
        pins = self.role_dir(role) / _PINS
        pins.mkdir(parents=True, exist_ok=True)
        with self._locked(role):
            if not self.path(role, version).is_dir():
                return False
            partial = pins / f"{_TMP_PREFIX}{holder}"
            partial.write_text(f"{version}\n")
            os.replace(partial, pins / holder)
        return True

    def pinned(self, role: str) -> dict[str, int]:
        """Each holder's pinned version of ``role``."""
        pins = self.role_dir(role) / _PINS
        if not pins.is_dir():
            return {}
        found: dict[str, int] = {}
        for entry in pins.iterdir():
            if entry.name.startswith(_TMP_PREFIX):
                continue
            try:
                found[entry.name] = int(entry.read_text().strip())
            except (OSError, ValueError):
                continue  # removed or half-written by hand: it pins nothing
        return found

    def prune(self, role: str, keep_last: int) -> list[int]:
        """Delete all but the newest ``keep_last`` versions (>= 1) and the pinned ones
        (:meth:`pin`); return the deleted ones.

        A deleted version is first renamed away (atomically), so it disappears as a whole; a
        reader still loading it from its old path may fail, hence keep at least 2 where readers
        load concurrently. Temporary directories abandoned by crashed publishers are removed too.
        """
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1 (the newest version is never deleted), got {keep_last}")
        folder = self.role_dir(role)
        deleted: list[int] = []
        with self._locked(role):
            pinned = set(self.pinned(role).values())
            for old in self.versions(role)[:-keep_last]:
                if old in pinned:
                    continue
                trash = folder / f"{_TRASH_PREFIX}{version_dirname(old)}-{os.getpid()}-{time.time_ns()}"
                os.rename(self.path(role, old), trash)
                deleted.append(old)
            now = time.time()
            for entry in folder.iterdir():
                stale_tmp = (
                    entry.name.startswith(_TMP_PREFIX) and now - entry.stat().st_mtime > _STALE_TMP_SECONDS
                )
                if entry.name.startswith(_TRASH_PREFIX) or stale_tmp:
                    shutil.rmtree(entry, ignore_errors=True)
        if deleted:
            logger.info("pruned %s versions %s", role, deleted)
        return deleted

    # ---------------------------------------------------------------- internals

    @contextmanager
    def _locked(self, role: str) -> Iterator[None]:
        lock_path = self.role_dir(role) / _LOCK
        with open(lock_path, "a+b") as lock_file:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    @staticmethod
    def _write_latest(folder: Path, version: int) -> None:
        fd, tmp_name = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}latest-", dir=folder)
        try:
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "w") as handle:
                handle.write(f"{version}\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, folder / _LATEST)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise


def fsync_tree(folder: Path) -> None:
    """Flush every file so a rename never exposes a directory whose data is still in flight."""
    for entry in folder.rglob("*"):
        if entry.is_file():
            fd = os.open(entry, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
