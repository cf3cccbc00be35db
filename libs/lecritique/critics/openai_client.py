"""A client of OpenAI-compatible chat-completions endpoints, for frozen LLM critics.

Timeouts on every request, retries with exponential backoff (honouring ``Retry-After``) on
timeouts, connection errors and 408/409/429/5xx answers, a concurrency limit (a semaphore shared
by every caller of one client), and a per-run cost counter: prompt and completion tokens as the
endpoint reports them in ``usage``, exported as Prometheus counters and kept as running totals.

The API key comes from an environment variable named in the config (a Kubernetes Secret mounts
it); it is sent as ``Authorization: Bearer <key>`` and never logged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client import Counter

from lecritique.critics.config import OpenAIEndpointConfig
from lecritique.critics.llm import Message

logger = logging.getLogger(__name__)

PROMPT_TOKENS = Counter(
    "lecritique_critic_llm_prompt_tokens_total",
    "Prompt tokens sent to the critic LLM endpoint",
    ["experiment"],
)
COMPLETION_TOKENS = Counter(
    "lecritique_critic_llm_completion_tokens_total",
    "Completion tokens received from the critic LLM endpoint",
    ["experiment"],
)
REQUESTS = Counter(
    "lecritique_critic_llm_requests_total",
    "Critic LLM HTTP attempts by outcome (ok, retried, failed)",
    ["experiment", "outcome"],
)
COST = Counter(
    "lecritique_critic_llm_cost_usd_total", "Estimated USD spent on the critic LLM endpoint", ["experiment"]
)

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class LLMRequestError(RuntimeError):
    """A chat completion that failed for good (after retries, or with a non-retryable status)."""


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


@dataclass
class Usage:
    """Running totals of one client (the per-run cost counter)."""

    requests: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


def cost_usd(config: OpenAIEndpointConfig, prompt_tokens: int, completion_tokens: int) -> float:
    """Estimated price of a number of tokens at the endpoint's configured rates."""
    return (
        prompt_tokens * config.prompt_price_per_million
        + completion_tokens * config.completion_price_per_million
    ) / 1e6


def resolve_api_key(config: OpenAIEndpointConfig) -> str | None:
    """The key from ``config.api_key_env``; a named but unset variable is an error."""
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ValueError(
            f"critic.llm.api_key_env names {config.api_key_env!r}, but that environment variable is not set "
            "(mount the API key Secret into the value evaluator)"
        )
    return key


class OpenAIChatClient:
    """Thread-safe; one per value-evaluator process."""

    def __init__(
        self, config: OpenAIEndpointConfig, *, api_key: str | None = None, experiment: str = ""
    ) -> None:
        self.config = config
        self.experiment = experiment
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            base_url=config.base_url,
            headers=headers,
            timeout=httpx.Timeout(config.timeout_seconds),
            limits=httpx.Limits(
                max_connections=config.concurrency, max_keepalive_connections=config.concurrency
            ),
        )
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._executor = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="critic-llm")
        self._usage_lock = threading.Lock()
        self.usage = Usage()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.headers.get("retry-after"):
            try:
                return min(float(response.headers["retry-after"]), self.config.max_backoff_seconds)
            except ValueError:
                pass
        return float(min(self.config.backoff_seconds * 2**attempt, self.config.max_backoff_seconds))

    def _count(self, outcome: str) -> None:
        REQUESTS.labels(self.experiment, outcome).inc()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult:
        """One chat completion, retried on transient failures; raises :class:`LLMRequestError`."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            body["seed"] = seed
        last_error = ""
        for attempt in range(self.config.max_retries + 1):
            response: httpx.Response | None = None
            with self._slots:
                try:
                    response = self._http.post("/chat/completions", json=body)
                except httpx.TimeoutException as error:
                    last_error = f"timeout after {self.config.timeout_seconds:.0f} s ({type(error).__name__})"
                except httpx.TransportError as error:
                    last_error = f"{type(error).__name__}: {error}"
            if response is not None:
                if response.status_code == 200:
                    return self._accept(response)
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in _RETRY_STATUS:
                    self._fail(last_error)
            if attempt == self.config.max_retries:
                break
            self._count("retried")
            with self._usage_lock:
                self.usage.retries += 1
            delay = self._delay(attempt, response)
            logger.warning(
                "critic LLM request failed (%s); retry %d in %.1f s", last_error, attempt + 1, delay
            )
            time.sleep(delay)
        self._fail(f"{last_error} (after {self.config.max_retries} retries)")
        raise AssertionError("unreachable")

    def _fail(self, message: str) -> None:
        self._count("failed")
        with self._usage_lock:
            self.usage.failures += 1
        raise LLMRequestError(f"critic LLM {self.config.base_url} model {self.config.model!r}: {message}")

    def _accept(self, response: httpx.Response) -> ChatResult:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        except (ValueError, KeyError, IndexError, TypeError) as error:
            self._fail(f"malformed chat completion ({type(error).__name__}: {error})")
            raise AssertionError("unreachable") from None
        cost = cost_usd(self.config, prompt_tokens, completion_tokens)
        self._count("ok")
        PROMPT_TOKENS.labels(self.experiment).inc(prompt_tokens)
        COMPLETION_TOKENS.labels(self.experiment).inc(completion_tokens)
        COST.labels(self.experiment).inc(cost)
        with self._usage_lock:
            self.usage.requests += 1
            self.usage.prompt_tokens += prompt_tokens
            self.usage.completion_tokens += completion_tokens
            self.usage.cost_usd += cost
        return ChatResult(text, prompt_tokens, completion_tokens, str(choice.get("finish_reason") or ""))

    def complete_many(
        self, chats: Sequence[Sequence[Message]], *, max_tokens: int, temperature: float = 0.0
    ) -> list[ChatResult | LLMRequestError]:
        """Every chat, ``concurrency`` at a time; a chat that failed for good is returned as its error."""

        def one(messages: Sequence[Message]) -> ChatResult | LLMRequestError:
            try:
                return self.complete(messages, max_tokens=max_tokens, temperature=temperature)
            except LLMRequestError as error:
                return error

        return list(self._executor.map(one, chats))
