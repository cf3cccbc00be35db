"""Base URLs a tenant may send to, compared once normalised.

A URL is compared in the form the server it reaches will act on: scheme and host in lower case,
the scheme's default port made explicit, the path percent-decoded once and its dot segments
resolved (``/alice/%2e%2e/bob`` is ``/bob``). What servers and proxies read in different ways is
refused rather than guessed: encoded slashes and backslashes (``%2f``, ``%5c``), a backslash, a
``%`` left after decoding (double encoding), path parameters (``..;``), control characters, an
empty segment, user info, a query or a fragment, a host with a trailing dot or a ``%``.
"""

from __future__ import annotations

import posixpath
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_AMBIGUOUS_ESCAPES = ("%2f", "%5c")


class NormalURL(NamedTuple):
    scheme: str
    host: str
    port: int
    path: str
    """Decoded, dot segments resolved, no trailing slash (``/`` for the root)."""


def normal_url(url: str) -> NormalURL | None:
    """The URL's normal form, or None when it is not an http(s) URL or could be read two ways."""
    if not url.isprintable() or "\\" in url or any(char.isspace() for char in url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in DEFAULT_PORTS or not host or host.endswith(".") or "%" in host:
        return None
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        return None
    if "?" in url or "#" in url:
        return None
    raw = parts.path or "/"
    if any(escape in raw.lower() for escape in _AMBIGUOUS_ESCAPES):
        return None
    try:
        decoded = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        return None
    if any(char in decoded for char in "%\\;") or not decoded.isprintable() or "//" in decoded.rstrip("/"):
        return None
    path = posixpath.normpath(decoded) if decoded != "/" else "/"
    return NormalURL(scheme, host, port if port is not None else DEFAULT_PORTS[scheme], path)


def under(target: NormalURL, base: NormalURL) -> bool:
    """Same scheme, host and port, and the path equal to the base's or below it on a segment boundary."""
    if target[:3] != base[:3]:
        return False
    root = base.path.rstrip("/")
    return target.path == (root or "/") or target.path.startswith(root + "/")


def endpoint_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    """``url`` lies under one of the ``allowed`` base URLs, both normalised (see the module docstring)."""
    target = normal_url(url)
    if target is None:
        return False
    return any(base is not None and under(target, base) for base in map(normal_url, allowed))
