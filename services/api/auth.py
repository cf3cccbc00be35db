"""Bearer-token authentication: tokens are stored only as SHA-256 hashes, one per tenant
(hashing and validation live in :mod:`lecritique.tenancy.tokens`)."""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from pathlib import Path

from lecritique.tenancy.tokens import hash_token, parse_token_hashes

__all__ = ["TokenRegistry", "hash_token"]

logger = logging.getLogger(__name__)


class TokenRegistry:
    """Maps a presented bearer token to its tenant; re-reads its file when it changes."""

    def __init__(
        self, hashes: dict[str, str] | None = None, path: Path | None = None, recheck_seconds: float = 5.0
    ) -> None:
        self._static = parse_token_hashes(hashes or {}, "LECRITIQUE_API_TOKENS")
        self._path = path
        self._recheck_seconds = recheck_seconds
        self._lock = threading.Lock()
        self._file_hashes: dict[str, str] = {}
        self._file_mtime: float | None = None
        self._checked_at = 0.0
        if path is not None:
            self._reload(force=True)

    def _reload(self, force: bool = False) -> None:
        assert self._path is not None
        now = time.monotonic()
        if not force and now - self._checked_at < self._recheck_seconds:
            return
        self._checked_at = now
        try:
            mtime = self._path.stat().st_mtime
        except OSError as error:
            if force:
                raise ValueError(f"cannot read the token file {self._path}: {error}") from None
            logger.error("token file %s unreadable (%s); keeping the tokens loaded before", self._path, error)
            return
        if mtime == self._file_mtime:
            return
        try:
            hashes = parse_token_hashes(json.loads(self._path.read_text()), str(self._path))
        except (ValueError, OSError) as error:
            if force:
                raise ValueError(str(error)) from None
            logger.error("token file %s invalid (%s); keeping the tokens loaded before", self._path, error)
            return
        self._file_hashes, self._file_mtime = hashes, mtime
        logger.info("loaded %d tenant token(s) from %s", len(hashes), self._path)

    @property
    def tenants(self) -> list[str]:
        return sorted({**self._file_hashes, **self._static})

    def tenant_of(self, token: str) -> str | None:
        """The tenant whose token this is, or None. Compares against every hash in constant time."""
        if self._path is not None:
            with self._lock:
                self._reload()
        presented = hash_token(token).encode()
        found = None
        for tenant, digest in {**self._file_hashes, **self._static}.items():
            if hmac.compare_digest(presented, digest.encode()):
                found = tenant
        return found
