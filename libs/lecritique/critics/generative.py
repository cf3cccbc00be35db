"""The generative critic (GenAC §5.1) as a value-evaluator backend.

For every state at a segment start, the critic (a causal LM that kept its LM head) reads the
prompt of :func:`lecritique.critics.prompts.generative_prompt` (In-Context Conditioning: the
actor's description and smoothed average reward), generates within its token budget, and states
``score:N``; the value is N / 10. Generation runs on a rollout engine (HF or vLLM). A state whose
completions all fail to parse gets a fallback and is counted, never an error: the siblings' mean
reward when the critic is shown its group (a group context), else the actor's running average —
a critic with ``context: none`` must not receive group information through its fallback. All tokens of a segment share its state's value.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np

from lecritique.critics.config import GenerativeCriticConfig
from lecritique.critics.llm import EngineGenerator
from lecritique.critics.prompts import generative_prompt, scored_text
from lecritique.critics.scoring import PARSE_FAILURES, ParsedScore, parse_score
from lecritique.critics.segments import expand_segment_values
from lecritique.critics.states import TrajectoryText, trajectory_states
from lecritique.critics.types import GROUP_CONTEXT_KINDS, ActorInfo, CriticQuery, CriticValues, group_baseline
from lecritique.engines import SamplingParams, build_engine
from lecritique.models.policy import load_tokenizer

logger = logging.getLogger(__name__)


def state_prompts(config: GenerativeCriticConfig, text: TrajectoryText, actor: ActorInfo) -> list[str]:
    """The critic prompt of every state of one decoded trajectory."""
    return [
        generative_prompt(
            config,
            context=text.context_text,
            actor=actor.description,
            reward_average=actor.reward_average,
            prompt=text.prompt_text,
            prefix=state.prefix_text,
        )
        for state in text.states
    ]


def critic_sampling(config: GenerativeCriticConfig, seed: int | None = None) -> SamplingParams:
    return SamplingParams(temperature=config.temperature, max_tokens=config.max_tokens, seed=seed)


class GenerativeCritic:
    def __init__(
        self,
        config: GenerativeCriticConfig,
        path: Path,
        *,
        policy_dir: str | Path,
        version: int = 0,
        generator: EngineGenerator | None = None,
    ) -> None:
        self.config = config
        self.policy_tokenizer = load_tokenizer(policy_dir)
        if generator is None:
            engine = build_engine(config.engine.model_copy(update={"model_path": str(path)}))
            generator = EngineGenerator(engine, load_tokenizer(path), version)
        self.generator = generator
        # The spec's context (a bare config has none): only a group context shows the siblings.
        self.shown_group = getattr(config, "context", "none") in GROUP_CONTEXT_KINDS
        logger.info("generative critic version %d from %s (%s engine)", version, path, config.engine.kind)

    @property
    def tokenizer(self):  # type: ignore[no-untyped-def]
        return self.generator.tokenizer

    def reload(self, version: int, path: Path) -> bool:
        """Swap in a newly published version without restarting the engine (vLLM starts in tens of seconds)."""
        self.generator.reload(version, str(path))
        return True

    def score_states(self, prompts: list[str]) -> tuple[list[list[ParsedScore]], dict[str, float], int]:
        """Parsed scores (``eval_samples`` per prompt), token statistics, and the weight version."""
        ids = [self.tokenizer.encode(prompt, add_special_tokens=True) for prompt in prompts]
        batch = self.generator.generate(ids, critic_sampling(self.config), n=self.config.eval_samples)
        parsed = [
            [parse_score(scored_text(self.config, c.text), self.config.score_tag) for c in group]
            for group in batch.completions
        ]
        stats = {
            "prompt_tokens": float(sum(g[0].prompt_tokens * len(g) for g in batch.completions if g)),
            "completion_tokens": float(sum(len(c.token_ids) for g in batch.completions for c in g)),
            "truncated_prompts": float(batch.truncated_prompts),
        }
        return parsed, stats, batch.version

    def values(self, queries: list[CriticQuery], actor: ActorInfo) -> CriticValues:
        segments = self.config.segments
        texts = [
            trajectory_states(
                q.trajectory, self.policy_tokenizer, segments.rule, segments.max_segments, segments.max_length
            )
            for q in queries
        ]
        prompts: list[str] = []
        for text in texts:
            prompts += state_prompts(self.config, text, actor)
        parsed, stats, version = self.score_states(prompts)
        failures: Counter[str] = Counter()
        fallback_states = 0
        values: list[np.ndarray] = []
        cursor = 0
        for query, text in zip(queries, texts, strict=True):
            baseline = group_baseline(query, actor) if self.shown_group else float(actor.reward_average)
            length = int(query.trajectory.token_ids.shape[0])
            state_values = []
            for samples in parsed[cursor : cursor + len(text.states)]:
                failures.update(p.failure for p in samples if p.failure is not None)
                scores = [p.value for p in samples if p.value is not None]
                if scores:
                    state_values.append(float(np.mean(scores)))
                else:
                    fallback_states += 1
                    state_values.append(baseline)
            cursor += len(text.states)
            if text.states:
                values.append(expand_segment_values(text.starts, state_values, length))
            else:
                values.append(np.full(length, baseline, dtype=np.float32))
        stats.update(
            {
                "states": float(len(prompts)),
                "completions": float(len(prompts) * self.config.eval_samples),
                "parse_failures": float(sum(failures.values())),
                "fallback_states": float(fallback_states),
                **{f"parse_failures_{reason}": float(failures[reason]) for reason in PARSE_FAILURES},
            }
        )
        return CriticValues(values, stats, version)

    def close(self) -> None:
        self.generator.close()
