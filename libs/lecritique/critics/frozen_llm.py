"""The frozen LLM critic with group context (LVRL) as a value-evaluator backend.

One query per trajectory (LVRL Table 6): the LLM sees the task, summaries of the *other*
trajectories of the group with their rewards, and the trajectory cut into segments (one per turn
by default), and answers the success probability of every state. These are hindsight values
(a state's value is judged knowing what followed it), fit for ``lvrl`` only; with ``hindsight:
false`` each state gets its own query showing only the prefix before it, which baseline
estimators (value, gae, tether, evpo) need (Le Critique eq. 5; the registry refuses the rest). The LLM is frozen: a local
rollout engine (HF or vLLM) or any OpenAI-compatible endpoint. A state the answer leaves out (or
an answer that never came, after retries) gets the group baseline and is counted.

Calibration is the estimator's job (``lvrl``): V(s_0) := the group success rate, V(s_S) := the
reward; these values supply the states in between. Every token of a segment carries its state's value.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from lecritique.critics.config import FrozenLLMConfig, LocalLLMConfig
from lecritique.critics.llm import EngineGenerator, Message, render_messages
from lecritique.critics.openai_client import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    REQUESTS,
    LLMRequestError,
    OpenAIChatClient,
    cost_usd,
    resolve_api_key,
)
from lecritique.critics.prompts import PeerText, frozen_messages, parse_state_values
from lecritique.critics.segments import expand_segment_values
from lecritique.critics.states import trajectory_states
from lecritique.critics.types import ActorInfo, CriticQuery, CriticValues, group_baseline
from lecritique.engines import SamplingParams, build_engine
from lecritique.models.policy import load_tokenizer

logger = logging.getLogger(__name__)


class FrozenLLMCritic:
    def __init__(self, config: FrozenLLMConfig, *, policy_dir: str | Path, experiment: str = "") -> None:
        self.config = config
        self.experiment = experiment
        self.policy_tokenizer = load_tokenizer(policy_dir)
        self.generator: EngineGenerator | None = None
        self.client: OpenAIChatClient | None = None
        if isinstance(config.llm, LocalLLMConfig):
            model_path = config.llm.model_path or str(policy_dir)
            engine = build_engine(config.llm.engine.model_copy(update={"model_path": model_path}))
            self.generator = EngineGenerator(engine, load_tokenizer(model_path))
            logger.info("frozen LLM critic: local %s engine on %s", config.llm.engine.kind, model_path)
        else:
            self.client = OpenAIChatClient(
                config.llm, api_key=resolve_api_key(config.llm), experiment=experiment
            )
            logger.info("frozen LLM critic: %s at %s", config.llm.model, config.llm.base_url)

    def _answer(self, chats: list[list[Message]]) -> tuple[list[str | None], dict[str, float]]:
        """The LLM's answer to every chat (None: failed for good) and token counts."""
        if self.generator is not None:
            prompts = [render_messages(chat, self.generator.tokenizer) for chat in chats]
            sampling = SamplingParams(temperature=self.config.temperature, max_tokens=self.config.max_tokens)
            batch = self.generator.generate(prompts, sampling)
            completions = [group[0] for group in batch.completions]
            prompt_tokens = sum(c.prompt_tokens for c in completions)
            completion_tokens = sum(len(c.token_ids) for c in completions)
            # A local engine is an LLM endpoint too: the same counters make runs comparable.
            PROMPT_TOKENS.labels(self.experiment).inc(prompt_tokens)
            COMPLETION_TOKENS.labels(self.experiment).inc(completion_tokens)
            REQUESTS.labels(self.experiment, "ok").inc(len(completions))
            stats = {
                "llm_requests": float(len(chats)),
                "llm_failures": 0.0,
                "llm_prompt_tokens": float(prompt_tokens),
                "llm_completion_tokens": float(completion_tokens),
                "llm_cost_usd": 0.0,
                "truncated_prompts": float(batch.truncated_prompts),
            }
            return [c.text for c in completions], stats
        assert self.client is not None
        llm = self.client.config
        results = self.client.complete_many(
            chats, max_tokens=self.config.max_tokens, temperature=self.config.temperature
        )
        answers: list[str | None] = []
        failures = prompt_tokens = completion_tokens = 0
        for result in results:
            if isinstance(result, LLMRequestError):
                logger.warning("frozen LLM critic: %s", result)
                failures += 1
                answers.append(None)
            else:
                answers.append(result.text)
                prompt_tokens += result.prompt_tokens
                completion_tokens += result.completion_tokens
        cost = cost_usd(llm, prompt_tokens, completion_tokens)
        stats = {
            "llm_requests": float(len(chats)),
            "llm_failures": float(failures),
            "llm_prompt_tokens": float(prompt_tokens),
            "llm_completion_tokens": float(completion_tokens),
            "llm_cost_usd": cost,
        }
        return answers, stats

    def values(self, queries: list[CriticQuery], actor: ActorInfo) -> CriticValues:
        segments = self.config.segments
        texts = [
            trajectory_states(
                q.trajectory, self.policy_tokenizer, segments.rule, segments.max_segments, segments.max_length
            )
            for q in queries
        ]
        # Hindsight: one chat per trajectory scores all its states. Prefix: one chat per state.
        asked: list[tuple[int, int | None]] = []
        for i, text in enumerate(texts):
            if text.states:
                asked += [(i, None)] if self.config.hindsight else [(i, k) for k in range(len(text.states))]
        chats = [
            frozen_messages(
                self.config, texts[i], [PeerText(p.summary, p.reward) for p in queries[i].peers], upto
            )
            for i, upto in asked
        ]
        answers, stats = self._answer(chats) if chats else ([], {})
        by_chat = dict(zip(asked, answers, strict=True))
        values: list[np.ndarray] = []
        missing = 0
        states = 0
        for index, (query, text) in enumerate(zip(queries, texts, strict=True)):
            baseline = group_baseline(query, actor)
            length = int(query.trajectory.token_ids.shape[0])
            if not text.states:
                values.append(np.full(length, baseline, dtype=np.float32))
                continue
            parsed = self._parsed(by_chat, index, len(text.states))
            states += len(parsed)
            missing += sum(value is None for value in parsed)
            state_values = [baseline if value is None else value for value in parsed]
            values.append(expand_segment_values(text.starts, state_values, length))
        stats.update({"states": float(states), "fallback_states": float(missing)})
        return CriticValues(values, stats, 0)

    def _parsed(
        self, by_chat: dict[tuple[int, int | None], str | None], index: int, count: int
    ) -> list[float | None]:
        """The values of one trajectory's states from its answer (hindsight) or answers (prefix)."""
        if self.config.hindsight:
            answer = by_chat[(index, None)]
            return parse_state_values(answer, count) if answer is not None else [None] * count
        parsed: list[float | None] = []
        for k in range(count):
            answer = by_chat[(index, k)]
            parsed.append(None if answer is None else parse_state_values(answer, k + 1)[k])
        return parsed

    def reload(self, version: int, path: Path) -> bool:
        """A frozen LLM has no versions."""
        return False

    def close(self) -> None:
        if self.generator is not None:
            self.generator.close()
        if self.client is not None:
            self.client.close()
