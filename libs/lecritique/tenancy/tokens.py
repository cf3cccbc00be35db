"""Bearer tokens of API tenants: only their SHA-256 is ever stored.

Tokens are random secrets (:func:`new_token` makes 256-bit ones), so a plain SHA-256 is enough to
keep them unusable if the hashes leak; there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import re
import secrets

HASH = re.compile(r"sha256:[0-9a-f]{64}")
PUBLISHED_TOKENS = ("lecritique-example-token",)
"""Example tokens printed in this repository (docs, example values files); anyone can read them."""
PUBLISHED_HASHES = ("sha256:f778a22ac59820388e330d83a53325a8766b72cdcde788f22e35bceeec42f21e",)
"""Their hashes, refused by the API and by the Helm chart (``lecritique.publishedTokenHashes``)."""
TENANT = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
"""A tenant name (matched whole, ``fullmatch``): 1-63 of a-z 0-9 _ . - starting alphanumeric."""


def hash_token(token: str) -> str:
    """The stored form of a bearer token: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random bearer token (256 bits)."""
    return "lct_" + secrets.token_urlsafe(32)


def is_tenant_name(name: object) -> bool:
    return isinstance(name, str) and TENANT.fullmatch(name) is not None


def parse_token_hashes(mapping: object, source: str) -> dict[str, str]:
    """Validate a tenant -> hash mapping; raises ValueError naming the bad entry."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{source}: expected a JSON object of tenant -> 'sha256:<hex>'")
    checked: dict[str, str] = {}
    for tenant, digest in mapping.items():
        if not is_tenant_name(tenant):
            raise ValueError(
                f"{source}: tenant name {str(tenant)[:80]!r} must be 1-63 of a-z 0-9 _ . - (starting alphanumeric)"
            )
        if not isinstance(digest, str) or not HASH.fullmatch(digest):
            raise ValueError(
                f"{source}: tokens.{tenant} must be 'sha256:' and 64 hex digits (a hash, never the token)"
            )
        if digest in PUBLISHED_HASHES:
            raise ValueError(
                f"{source}: tokens.{tenant} is the hash of a token published in the lecritique repository; "
                f"make a real one with `lecritique api hash-token {tenant}`"
            )
        checked[tenant] = digest
    return checked
