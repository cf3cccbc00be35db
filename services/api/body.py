"""Request bodies: size-limited reading and strict, depth-limited JSON or YAML parsing.

Every malformed body is a 422 naming ``body``: invalid UTF-8, invalid JSON, the non-standard
constants ``NaN`` and ``Infinity`` that Python's parser would accept, integers of thousands of
digits, and nesting deeper than :data:`MAX_DEPTH` (a spec is a few levels deep; a 1,000-deep
document would otherwise exhaust the interpreter's recursion limit somewhere downstream).

A YAML body (``Content-Type`` in :data:`YAML_TYPES`) is read as ``lecritique run`` reads a spec file
(YAML's safe schema), with what JSON could not express refused too: aliases (``*name``, which
also make "billion laughs" bodies), merge keys (``<<``), several documents, keys that are not
strings, ``.nan`` / ``.inf`` and values of other types (a date, binary); the message gives the
line and column.

Parsing costs the API no more than a spec needs (issue #46, item 4: a 488 KiB YAML body held the
event loop for 5-29 s in the pure-Python loader). libyaml's parser (``yaml.CSafeLoader``) first
reads the body as a stream of events, refusing aliases, merge keys, a second document, nesting
deeper than :data:`MAX_DEPTH` and more than :data:`MAX_NODES` nodes before anything is built; only
a body within those bounds is then built into data. A JSON body is held to the same node count.
The routes call :func:`parse_body` in a worker thread, never on the event loop.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import yaml

from services.api.errors import BodyTooLarge
from services.api.experiments import FieldError, InvalidSpec

MAX_DEPTH = 32
MAX_NODES = 20_000
"""Most values (mappings, lists and scalars, keys included) in one body: the largest shipped spec
has a few hundred; this bounds what building and validating a body can cost."""
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
"""Content types read as YAML; any other body is read as JSON."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _invalid(message: str, kind: str = "json_invalid") -> InvalidSpec:
    return InvalidSpec([FieldError("body", message, kind)])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_big(value: Any) -> str | None:
    """What makes parsed data too deep or too large for a spec (None: neither), found without recursion."""
    stack, nodes = [(value, 1)], 0
    while stack:
        current, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"holds more than {MAX_NODES} values"
        if isinstance(current, dict | list):
            if depth > MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep"
            if isinstance(current, dict):
                nodes += len(current)  # the keys
                stack.extend((item, depth + 1) for item in current.values())
            else:
                stack.extend((item, depth + 1) for item in current)
    return None


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
    problem = _too_big(data)
    if problem is not None:
        raise _invalid(f"the JSON document {problem}")
    return data


def is_yaml(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` header names YAML (parameters such as ``charset`` aside)."""
    return (content_type or "").split(";", 1)[0].strip().lower() in YAML_TYPES


MERGE_OR_ALIAS = (
    "aliases (*name) and merge keys (<<) are not accepted in a request body; write the values out"
)


def _refuse_event(problem: str, event: Any) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=event.start_mark)


def _scan_events(text: str) -> None:
    """Read ``text`` as libyaml's events and raise :class:`yaml.MarkedYAMLError` for what a body may
    not hold (see the module docstring) before any of it is built: the scan stops at the first."""
    depth, nodes, documents = 0, 0, 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise _refuse_event(MERGE_OR_ALIAS, event)
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise _refuse_event("expected a single document in the stream, found another", event)
        elif isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
            nodes += 1
            if nodes > MAX_NODES:
                raise _refuse_event(f"the document holds more than {MAX_NODES} values", event)
            if isinstance(event, yaml.ScalarEvent) and event.value == "<<" and event.implicit[0]:
                raise _refuse_event(MERGE_OR_ALIAS, event)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _refuse_event(f"the document is nested more than {MAX_DEPTH} levels deep", event)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _json_like(value: Any) -> str | None:
    """What in ``value`` JSON could not hold (a non-string key, NaN, a date, ...), or None."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        current, where = stack.pop()
        here = where or "the document"
        if isinstance(current, dict):
            for key, item in current.items():
                if not isinstance(key, str):
                    return f"key {key!r} at {here} is not a string: quote it"
                stack.append((item, f"{where}.{key}" if where else key))
        elif isinstance(current, list):
            stack.extend((item, f"{where}.{index}") for index, item in enumerate(current))
        elif isinstance(current, float) and not math.isfinite(current):
            return f"{here}: {current} is not a number JSON can hold"
        elif current is not None and not isinstance(current, str | int | float | bool):
            return f"{here}: a {type(current).__name__} value; quote it to make it a string"
    return None


def parse_yaml(raw: bytes) -> Any:
    """The YAML document in ``raw``, as the JSON data it stands for; raises :class:`InvalidSpec` (422)."""
    if not raw.strip():
        raise _invalid("the request body is empty; send the experiment spec as YAML", "yaml_invalid")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("the request body is not UTF-8", "yaml_invalid") from None
    try:
        _scan_events(text)
        data = yaml.load(text, Loader=yaml.CSafeLoader)  # the safe schema: plain data only
    except RecursionError:
        raise _invalid(
            f"the YAML document is nested more than {MAX_DEPTH} levels deep", "yaml_invalid"
        ) from None
    except yaml.YAMLError as error:
        if "maximum nesting depth" in str(error):  # libyaml's own limit, met while it scans ahead
            raise _invalid(
                f"the YAML document is nested more than {MAX_DEPTH} levels deep", "yaml_invalid"
            ) from None
        raise _invalid(f"the request body is not valid YAML: {str(error)[:300]}", "yaml_invalid") from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise _invalid(
            f"the request body holds a number YAML cannot read: {str(error)[:200]}", "yaml_invalid"
        ) from None
    problem = _too_big(data) or _json_like(data)
    if problem is not None:
        raise _invalid(f"the YAML document holds what a spec cannot: {problem}", "yaml_invalid")
    return data


def parse_body(raw: bytes, content_type: str | None) -> Any:
    """A request body as YAML when its content type says so, else as JSON."""
    return parse_yaml(raw) if is_yaml(content_type) else parse_json(raw)


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
