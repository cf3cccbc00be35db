"""An OpenAI-compatible chat-completions route over a rollout engine (``/v1/chat/completions``, ``/v1/models``).

The rollout service mounts it on a side port (``LECRITIQUE_ROLLOUT_OPENAI_PORT``) so that the
policy, or any model a rollout service serves, can be the LLM of a frozen critic, and so that the
OpenAI client is tested against a real HTTP server. Chats are rendered with the tokenizer's chat
template, or as plain text for tiny models without one (:func:`render_messages`). Usage counts
are real token counts. A key, when configured, is required as ``Authorization: Bearer <key>``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from lecritique.critics.llm import render_messages
from lecritique.engines import Completion, RolloutEngine, SamplingParams

logger = logging.getLogger(__name__)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    """system, user or assistant."""
    content: str
    """The message text."""


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    """Must name the served model."""
    messages: list[ChatMessage] = Field(min_length=1)
    """The conversation so far."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Completion budget (legacy name)."""
    max_completion_tokens: int | None = Field(default=None, ge=1)
    """Completion budget (current name; wins over max_tokens)."""
    temperature: float = Field(default=1.0, ge=0.0)
    """Sampling temperature (0: greedy)."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus mass."""
    n: int = Field(default=1, ge=1, le=64)
    """Completions per request."""
    seed: int | None = None
    """Sampling seed."""


def create_app(
    engine: RolloutEngine,
    tokenizer: Any,
    *,
    model_name: str,
    lock: AbstractContextManager[Any],
    api_key: str | None = None,
    default_max_tokens: int = 256,
) -> FastAPI:
    """The FastAPI app; ``lock`` serialises engine use with the service's other callers."""
    app = FastAPI(title="lecritique OpenAI-compatible route")

    def authorise(authorization: str | None) -> None:
        if api_key is not None and authorization != f"Bearer {api_key}":
            raise HTTPException(status_code=401, detail="invalid or missing API key")

    @app.get("/v1/models")
    def models(authorization: str | None = Header(default=None)) -> dict[str, Any]:
        authorise(authorization)
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "lecritique"}]}

    @app.post("/v1/chat/completions")
    def chat_completions(
        request: ChatCompletionRequest, authorization: str | None = Header(default=None)
    ) -> dict[str, Any]:
        authorise(authorization)
        if request.model != model_name:
            raise HTTPException(
                status_code=404,
                detail=f"model {request.model!r} is not served here; this serves {model_name!r}",
            )
        prompt = render_messages([m.model_dump() for m in request.messages], tokenizer)
        sampling = SamplingParams(
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_completion_tokens or request.max_tokens or default_max_tokens,
            seed=request.seed,
        )
        try:
            with lock:
                (completions,) = engine.generate([prompt], n=request.n, sampling=sampling)
        except ValueError as error:
            raise HTTPException(status_code=400, detail=str(error)) from None
        return _chat_completion(model_name, prompt, completions)

    return app


def _chat_completion(model_name: str, prompt: list[int], completions: list[Completion]) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` body of one request's completions."""
    completion_tokens = sum(len(c.token_ids) for c in completions)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": c.text},
                "finish_reason": c.finish_reason,
            }
            for i, c in enumerate(completions)
        ],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": completion_tokens,
            "total_tokens": len(prompt) + completion_tokens,
        },
    }


@dataclass
class RunningHTTPServer:
    server: uvicorn.Server
    thread: threading.Thread
    port: int

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve_in_thread(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> RunningHTTPServer:
    """Run ``app`` on ``host:port`` (0: any free port) in a daemon thread; returns once it listens."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="openai-route", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the OpenAI-compatible route did not start on {host}:{bound}")
        time.sleep(0.02)
    logger.info("OpenAI-compatible route on http://%s:%d/v1", host, bound)
    return RunningHTTPServer(server, thread, bound)
