"""Request bodies: size-limited reading and strict, depth-limited JSON parsing.

Every malformed body is a 422 naming ``body``: invalid UTF-8, invalid JSON, the non-standard
constants ``NaN`` and ``Infinity`` that Python's parser would accept, integers of thousands of
digits, and nesting deeper than :data:`MAX_DEPTH` (a spec is a few levels deep; a 1,000-deep
document would otherwise exhaust the interpreter's recursion limit somewhere downstream).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from services.api.errors import BodyTooLarge
from services.api.experiments import FieldError, InvalidSpec

MAX_DEPTH = 32

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _invalid(message: str) -> InvalidSpec:
    return InvalidSpec([FieldError("body", message, "json_invalid")])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """Nesting depth, computed without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
            stack.extend(
                (item, depth + 1) for item in (current.values() if isinstance(current, dict) else current)
            )
    return deepest


def parse_json(raw: bytes) -> Any:
    """The JSON document in ``raw``; raises :class:`InvalidSpec` (422) for anything malformed."""
    if not raw.strip():
        raise _invalid("the request body is empty; send the experiment spec as JSON")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("the request body is not UTF-8") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise _invalid(f"the JSON document is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as error:
        raise _invalid(f"the request body is not valid JSON: {str(error)[:200]}") from None
    if _depth(data) > MAX_DEPTH:
        raise _invalid(f"the JSON document is nested more than {MAX_DEPTH} levels deep")
    return data


class BodySizeLimit:
    """ASGI middleware: 413 for a declared Content-Length over the limit; a streamed body that
    grows past it raises :class:`BodyTooLarge` while the route reads it (also 413)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, limited, send)

    async def _reject(self, send: Send) -> None:
        from services.api.errors import error_response

        response = error_response(
            413, [FieldError("body", f"the request body exceeds {self.max_bytes} bytes", "too_large")]
        )
        await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
