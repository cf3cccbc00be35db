"""The OpenAI-compatible client against real local HTTP servers: a scripted one (retries, timeouts,
concurrency, cost) and the rollout service's own OpenAI-compatible route (a real process)."""

import time
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from prometheus_client import REGISTRY

from lecritique.critics import openai_client
from lecritique.critics.config import FrozenLLMConfig, OpenAIEndpointConfig
from lecritique.critics.frozen_llm import FrozenLLMCritic
from lecritique.critics.llm import render_messages
from lecritique.critics.openai_client import LLMRequestError, OpenAIChatClient, resolve_api_key
from lecritique.critics.types import ActorInfo, CriticQuery, Peer
from lecritique.models.policy import load_tokenizer
from tests.integration.critics.llm_server import LLM_KEY, LLM_MODEL, Reply, ScriptedLLM, rollout_llm
from tests.unit.critics.conftest import text_trajectory

CHAT = [{"role": "user", "content": "hello"}]


def counter(name, **labels):
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def scripted():
    server = ScriptedLLM()
    yield server
    server.close()


def client_for(server, experiment, **options):
    config = OpenAIEndpointConfig(base_url=server.base_url, model="m", backoff_seconds=0.01, **options)
    return OpenAIChatClient(config, api_key="k", experiment=experiment)


def test_transient_failures_are_retried_with_backoff(scripted, monkeypatch):
    scripted.script = [Reply(503), Reply(429, headers={"Retry-After": "0.2"}), Reply(200)]
    client = client_for(scripted, "retry")
    waits: list[float] = []
    # The client's own pauses, seen as the client asks for them (its module's ``time`` only).
    monkeypatch.setattr(
        openai_client,
        "time",
        SimpleNamespace(sleep=lambda seconds: (waits.append(seconds), time.sleep(seconds))),
    )
    result = client.complete(CHAT, max_tokens=5)
    # The configured backoff (0.01 s) after the 503, then the 429's Retry-After: honoured.
    assert waits == pytest.approx([0.01, 0.2])
    assert result.text.startswith("0: 0.25") and (result.prompt_tokens, result.completion_tokens) == (10, 3)
    assert len(scripted.requests) == 3
    assert all(
        r["authorization"] == "Bearer k" and r["path"] == "/v1/chat/completions" for r in scripted.requests
    )
    assert scripted.requests[0]["body"] == {
        "model": "m",
        "messages": CHAT,
        "max_tokens": 5,
        "temperature": 0.0,
    }
    assert counter("lecritique_critic_llm_requests_total", experiment="retry", outcome="retried") == 2
    assert counter("lecritique_critic_llm_requests_total", experiment="retry", outcome="ok") == 1
    assert client.usage.retries == 2 and client.usage.requests == 1


def test_client_errors_are_not_retried_and_fail_clearly(scripted):
    scripted.script = [Reply(400, body={"error": "bad model"})]
    client = client_for(scripted, "bad")
    with pytest.raises(LLMRequestError, match="HTTP 400.*bad model"):
        client.complete(CHAT, max_tokens=5)
    assert len(scripted.requests) == 1
    scripted.script = [Reply(200, body={"unexpected": True})]
    with pytest.raises(LLMRequestError, match="malformed chat completion"):
        client.complete(CHAT, max_tokens=5)
    assert counter("lecritique_critic_llm_requests_total", experiment="bad", outcome="failed") == 2


def test_timeouts_are_retried_then_reported(scripted):
    scripted.default = Reply(delay=1.0)
    client = client_for(scripted, "slow", timeout_seconds=0.2, max_retries=1)
    with pytest.raises(LLMRequestError, match="timeout.*after 1 retries"):
        client.complete(CHAT, max_tokens=5)
    assert len(scripted.requests) == 2


def test_concurrency_limit_and_cost_counter(scripted):
    scripted.default = Reply(delay=0.2)
    client = client_for(
        scripted, "cost", concurrency=3, prompt_price_per_million=2.0, completion_price_per_million=10.0
    )
    results = client.complete_many([[{"role": "user", "content": "x" * i}] for i in range(8)], max_tokens=4)
    assert [r.text.split()[-1] for r in results] == [str(i) for i in range(8)]  # order kept
    assert scripted.max_in_flight == 3
    assert client.usage.prompt_tokens == 80 and client.usage.completion_tokens == 24
    assert client.usage.cost_usd == pytest.approx((80 * 2.0 + 24 * 10.0) / 1e6)
    assert counter("lecritique_critic_llm_prompt_tokens_total", experiment="cost") == 80
    assert counter("lecritique_critic_llm_completion_tokens_total", experiment="cost") == 24
    assert counter("lecritique_critic_llm_cost_usd_total", experiment="cost") == pytest.approx(
        client.usage.cost_usd
    )


def test_failed_chats_come_back_as_errors_and_the_critic_falls_back(
    scripted, ascii_model, ascii_tokenizer, monkeypatch
):
    monkeypatch.setenv("CRITIC_KEY", "k")
    scripted.script = [Reply(500), Reply(500)]  # the first query fails for good (max_retries 1)
    config = FrozenLLMConfig(
        llm=OpenAIEndpointConfig(
            base_url=scripted.base_url,
            model="m",
            api_key_env="CRITIC_KEY",
            max_retries=1,
            backoff_seconds=0.01,
            concurrency=1,
        )
    )
    critic = FrozenLLMCritic(config, policy_dir=ascii_model, experiment="fallback")
    trajectories = [text_trajectory(ascii_tokenizer, "2+2=?", ["It is 4."], 1.0, name=n) for n in "ab"]
    queries = [
        CriticQuery(trajectories[0], peers=(Peer("b", "x", 0.0),)),
        CriticQuery(trajectories[1], peers=(Peer("a", "y", 1.0),)),
    ]
    result = critic.values(queries, ActorInfo())
    assert result.stats["llm_failures"] == 1 and result.stats["fallback_states"] == 1
    assert result.values[0] == pytest.approx(np.zeros(len(trajectories[0].token_ids)))  # peer mean
    assert result.values[1] == pytest.approx(
        np.full(len(trajectories[1].token_ids), 0.25)
    )  # the answer "0: 0.25"
    critic.close()


def test_api_key_comes_from_the_named_environment_variable(monkeypatch):
    config = OpenAIEndpointConfig(base_url="http://localhost:1/v1", model="m", api_key_env="MY_CRITIC_KEY")
    monkeypatch.delenv("MY_CRITIC_KEY", raising=False)
    with pytest.raises(ValueError, match="MY_CRITIC_KEY.*not set"):
        resolve_api_key(config)
    monkeypatch.setenv("MY_CRITIC_KEY", "secret")
    assert resolve_api_key(config) == "secret"
    assert resolve_api_key(config.model_copy(update={"api_key_env": None})) is None


def test_rollout_service_serves_an_openai_compatible_route(ascii_model, tmp_path):
    with rollout_llm(ascii_model, tmp_path) as llm:
        models = httpx.get(
            f"{llm.base_url}/models", headers={"Authorization": f"Bearer {LLM_KEY}"}, timeout=10
        ).json()
        assert [m["id"] for m in models["data"]] == [LLM_MODEL]
        assert httpx.get(f"{llm.base_url}/models", timeout=10).status_code == 401
        config = OpenAIEndpointConfig(base_url=llm.base_url, model=LLM_MODEL, api_key_env=None)
        with pytest.raises(LLMRequestError, match="HTTP 401"):
            OpenAIChatClient(config).complete(CHAT, max_tokens=4)
        with pytest.raises(LLMRequestError, match="HTTP 404.*not served"):
            OpenAIChatClient(config.model_copy(update={"model": "gpt-x"}), api_key=LLM_KEY).complete(
                CHAT, max_tokens=4
            )
        client = OpenAIChatClient(config, api_key=LLM_KEY, experiment="route")
        messages = [{"role": "system", "content": "score states"}, {"role": "user", "content": "0: ?"}]
        result = client.complete(messages, max_tokens=6, temperature=1.0)
        tokenizer = load_tokenizer(ascii_model)
        # Usage counts the real tokens: the rendered chat, and at most max_tokens generated.
        assert result.prompt_tokens == len(render_messages(messages, tokenizer))
        assert 1 <= result.completion_tokens <= 6
        assert result.finish_reason in ("stop", "length")
        assert (
            counter("lecritique_critic_llm_prompt_tokens_total", experiment="route") == result.prompt_tokens
        )
