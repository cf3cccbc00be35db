"""HTTP with the API's error answers turned into exceptions, and retries with backoff on 503.

A 503 (the API or its Redis briefly unavailable) or a failed connection is retried up to
``RetryPolicy.attempts`` times, waiting what ``Retry-After`` asks (seconds or an HTTP date) or
else an exponential backoff, never more than ``max_delay``. Submissions carry an
``Idempotency-Key``, so retrying a POST never starts a second experiment.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from lecritique.client.errors import (
    ApiError,
    Forbidden,
    InvalidSpec,
    NotFound,
    Unauthorized,
    Unavailable,
    field_problems,
)
from lecritique.client.settings import refused_token_advice

RetryCallback = Callable[[str, int, int, float], None]
"""Called before each wait between tries: (the problem, the try that failed, tries in all, seconds to wait)."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    """Tries in all (the first one included)."""
    base_delay: float = 0.5
    """Backoff before the second try; doubled each time."""
    max_delay: float = 30.0
    """No single wait is longer than this, whatever Retry-After says."""


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds to wait (it is either a number of seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _detail(response: httpx.Response) -> tuple[Any, str]:
    try:
        body = response.json()
    except ValueError:
        return None, response.text.strip() or response.reason_phrase
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # the API's ErrorResponse: [{field, message, type}, ...]
        parts = [
            f"{d.get('field')}: {d.get('message')}"
            if d.get("field") not in (None, "request")
            else str(d.get("message"))
            for d in detail
            if isinstance(d, dict)
        ]
        detail = "; ".join(parts) or None
    return body, detail if isinstance(detail, str) else response.reason_phrase


def raise_for_status(response: httpx.Response, token_source: str = "argument") -> None:
    """Raise the client error an API error answer means (nothing for 2xx/3xx); a 401 says what to
    fix for a token that came from ``token_source`` (:func:`~lecritique.client.settings.refused_token_advice`)."""
    if response.status_code < 400:
        return
    body, detail = _detail(response)
    code = response.status_code
    if code == 401:
        raise Unauthorized(
            f"the API refused the token ({detail}): {refused_token_advice(token_source)}", code
        )
    if code == 403:
        raise Forbidden(f"forbidden: {detail}", code)
    if code == 404:
        raise NotFound(f"not found: {detail}", code)
    if code == 422:
        raise InvalidSpec(field_problems(body))
    if code == 503:
        raise Unavailable(f"the API is unavailable (503): {detail}", code)
    raise ApiError(f"the API answered {code}: {detail}", code)


class Transport:
    """An ``httpx.Client`` bound to the API's base URL and token, with retries."""

    def __init__(
        self,
        api_url: str,
        token: str | None,
        *,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        token_source: str = "argument",
        on_retry: RetryCallback | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.api_url = api_url
        self.retry = retry or RetryPolicy()
        self.token_source = token_source
        self.on_retry = on_retry
        self._sleep = sleep
        self._http = httpx.Client(base_url=api_url, headers=headers, timeout=timeout, transport=transport)

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        """The answer to one request (retried on 503 and connection failures); raises on errors."""
        problem = ""
        for attempt in range(self.retry.attempts):
            delay = self.retry.base_delay * 2**attempt
            try:
                response = self._http.request(method, path, **options)
            except httpx.TransportError as error:
                problem = f"cannot reach the API at {self.api_url} ({type(error).__name__}: {error})"
            else:
                if response.status_code != 503:
                    raise_for_status(response, self.token_source)
                    return response
                problem = f"the API is unavailable (503): {_detail(response)[1]}"
                delay = retry_after_seconds(response.headers.get("Retry-After")) or delay
            if attempt + 1 < self.retry.attempts:
                wait = min(delay, self.retry.max_delay)
                if self.on_retry is not None:
                    self.on_retry(problem, attempt + 1, self.retry.attempts, wait)
                self._sleep(wait)
        raise Unavailable(f"{problem} (gave up after {self.retry.attempts} tries)", 503)

    def close(self) -> None:
        self._http.close()
