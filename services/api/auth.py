"""Bearer-token authentication: tokens are stored only as SHA-256 hashes, one per tenant.

Tokens are random secrets (``lecritique api hash-token`` makes 256-bit ones), so a plain SHA-256
is enough to keep them unusable if the hashes leak; there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")
_TENANT = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def hash_token(token: str) -> str:
    """The stored form of a bearer token: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random bearer token (256 bits)."""
    return "lct_" + secrets.token_urlsafe(32)


def parse_token_hashes(mapping: object, source: str) -> dict[str, str]:
    """Validate a tenant -> hash mapping; raises ValueError naming the bad entry."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{source}: expected a JSON object of tenant -> 'sha256:<hex>'")
    checked: dict[str, str] = {}
    for tenant, digest in mapping.items():
        if not isinstance(tenant, str) or not _TENANT.match(tenant):
            raise ValueError(f"{source}: tenant name {tenant!r} must be 1-63 of a-z 0-9 _ . - (starting alphanumeric)")
        if not isinstance(digest, str) or not _HASH.match(digest):
            raise ValueError(f"{source}: tokens.{tenant} must be 'sha256:' and 64 hex digits (a hash, never the token)")
        checked[tenant] = digest
    return checked


class TokenRegistry:
    """Maps a presented bearer token to its tenant; re-reads its file when it changes."""

    def __init__(self, hashes: dict[str, str] | None = None, path: Path | None = None, recheck_seconds: float = 5.0) -> None:
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
