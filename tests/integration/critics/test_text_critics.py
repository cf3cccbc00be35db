"""The generative and frozen-LLM critics in process on a tiny model: values, fallbacks, REINFORCE."""

import itertools

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch, get_estimator
from lecritique.critics.config import FrozenLLMConfig, GenerativeCriticConfig
from lecritique.critics.frozen_llm import FrozenLLMCritic
from lecritique.critics.generative import GenerativeCritic, state_prompts
from lecritique.critics.generative_trainer import GenerativeCriticTrainer, reinforce_advantages
from lecritique.critics.segments import expand_segment_values
from lecritique.critics.states import trajectory_states
from lecritique.critics.types import ActorInfo, CriticQuery, Peer
from tests.unit.critics.conftest import text_trajectory


@pytest.fixture(scope="module")
def queries(ascii_tokenizer):
    solved = text_trajectory(ascii_tokenizer, "2+2=?", ["It is 4. Sure", "yes"], 1.0, name="a")
    failed = text_trajectory(ascii_tokenizer, "2+2=?", ["five"], 0.0, name="b")
    return [
        CriticQuery(solved, peers=(Peer("b", "five", 0.0), Peer("c", "4", 1.0))),
        CriticQuery(failed),  # no peers: the fallback is the actor's average reward
    ]


def test_generative_values_are_parsed_scores_or_the_group_baseline(ascii_model, ascii_tokenizer, queries):
    # Greedy decoding: scoring the prompts again reproduces exactly what values() parsed.
    config = GenerativeCriticConfig(temperature=0.0, max_tokens=6, reasoning=False)
    critic = GenerativeCritic(config, ascii_model, policy_dir=ascii_model, version=3)
    actor = ActorInfo("0.1M llama", 0.25)
    result = critic.values(queries, actor)
    assert result.version == 3
    texts = [trajectory_states(q.trajectory, ascii_tokenizer, "sentence", 16) for q in queries]
    # "It is 4. " | "Sure"+EOS, observation "\nok\n" (4 tokens, no state), turn 2 "yes". The space
    # after "4." confirms the stop ended a sentence, so the segment starts after it (prefix only).
    assert [t.starts.tolist() for t in texts] == [[0, 9, 18], [0]]
    prompts = [p for t in texts for p in state_prompts(config, t, actor)]
    parsed, _, _ = critic.score_states(prompts)
    expected_states = []
    baselines = [0.25, 0.25]  # no group context: the actor's average, never the peers' mean
    cursor = 0
    for text, baseline in zip(texts, baselines, strict=True):
        scores = [p[0].value if p[0].ok else baseline for p in parsed[cursor : cursor + len(text.states)]]
        expected_states.append(scores)
        cursor += len(text.states)
    for values, text, scores, query in zip(result.values, texts, expected_states, queries, strict=True):
        assert values.shape == query.trajectory.token_ids.shape and values.dtype == np.float32
        bounds = [*text.starts.tolist(), len(values)]
        for score, start, end in zip(scores, bounds[:-1], bounds[1:], strict=True):
            assert values[start:end] == pytest.approx([score] * (end - start))
    failures = sum(not p[0].ok for p in parsed)
    assert result.stats["states"] == 4 and result.stats["completions"] == 4
    assert result.stats["parse_failures"] == result.stats["fallback_states"] == failures
    assert result.stats["prompt_tokens"] > 0 and result.stats["completion_tokens"] > 0
    critic.close()


def test_value_advantages_are_constant_within_a_segment(ascii_tokenizer, queries):
    trajectory = queries[0].trajectory
    text = trajectory_states(trajectory, ascii_tokenizer, "sentence", 16)
    values = expand_segment_values(text.starts, [0.2, 0.6, 0.9], len(trajectory.token_ids))
    batch = AdvantageBatch(
        rewards=np.array([1.0]),
        group_ids=np.array([0]),
        mask=trajectory.policy_mask[None],
        values=values[None],
    )
    advantages = get_estimator("value").compute(batch)[0]
    bounds = [*text.starts.tolist(), len(values)]
    for start, end in itertools.pairwise(bounds):
        segment = advantages[start:end][trajectory.policy_mask[start:end]]
        assert np.ptp(segment) == 0.0


def test_frozen_llm_falls_back_for_missing_states_and_counts_them(ascii_model, queries):
    critic = FrozenLLMCritic(
        FrozenLLMConfig(max_tokens=8, system_prompt="values"), policy_dir=ascii_model, experiment="test"
    )
    result = critic.values(queries, ActorInfo("x", 0.25))
    # An untrained model answers no "k: p" lines: every state gets its group baseline.
    assert result.stats["llm_requests"] == 2 and result.stats["states"] == 3
    assert result.stats["fallback_states"] == 3
    assert result.values[0] == pytest.approx(np.full(len(queries[0].trajectory.token_ids), 0.5))
    assert result.values[1] == pytest.approx(np.full(len(queries[1].trajectory.token_ids), 0.25))
    assert result.version == 0
    critic.close()


def test_reinforce_baselines():
    rewards = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert reinforce_advantages(rewards, GenerativeCriticConfig(baseline="none")) == pytest.approx(rewards)
    assert reinforce_advantages(rewards, GenerativeCriticConfig(baseline="batch_mean")) == pytest.approx(
        rewards - 0.5
    )
    assert reinforce_advantages(rewards, GenerativeCriticConfig(baseline="state_mean")) == pytest.approx(
        np.array([[0.5, -0.5], [0.0, 0.0]])
    )


def test_reinforce_raises_the_critics_reward(ascii_model, ascii_tokenizer):
    """Every state has return 1, so the reward 1 - (1 - v)^2 favours high scores: REINFORCE on
    the critic's own samples must move its scores up (and earn more reward) within a few updates.
    Power (checked by hand): with the advantage's sign flipped the late reward fell to 0.00 from
    0.05, with a zero learning rate it stayed at 0.06; both fail the 0.1 gain asserted here."""
    config = GenerativeCriticConfig(
        reasoning=False,
        max_tokens=2,
        samples_per_state=16,
        baseline="state_mean",
        max_train_states=None,
        optimizer={"lr": 1e-2, "weight_decay": 0.0},
    )
    trainer = GenerativeCriticTrainer.from_policy(ascii_model, config, seed=1)
    batch = [text_trajectory(ascii_tokenizer, "2+2=?", ["4"], 1.0, name=f"t{i}") for i in range(2)]
    history = [trainer.train_step(batch) for _ in range(16)]
    assert all(np.isfinite(m["loss"]) for m in history)
    assert history[0]["states"] == 2 and history[0]["samples"] == 32
    early = np.mean([m["critic_reward"] for m in history[:4]])
    late = np.mean([m["critic_reward"] for m in history[-4:]])
    assert late > early + 0.1, (early, late)
    assert trainer.steps == 16


class _Unparseable:
    """A critic generator whose every completion fails to parse."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, sampling, n=1):
        from lecritique.critics.llm import Generated, GenerationBatch

        return GenerationBatch(
            [[Generated("no idea", [1], [0.0], len(p), "stop")] * n for p in prompts], list(prompts), 0, 0
        )

    def close(self):
        pass


@pytest.mark.parametrize(("context", "expected"), [("none", 0.25), ("loo_group", 0.5)])
def test_a_generative_critic_without_group_context_falls_back_to_the_actors_average(
    ascii_model, ascii_tokenizer, queries, context, expected
):
    """Siblings' mean reward would hand a context-none critic group information on a parse failure."""
    from lecritique.critics.specs import GenerativeCriticSpec

    critic = GenerativeCritic(
        GenerativeCriticSpec(context=context),
        ascii_model,
        policy_dir=ascii_model,
        generator=_Unparseable(ascii_tokenizer),
    )
    result = critic.values([queries[0]], ActorInfo("x", 0.25))  # peers' mean reward 0.5, actor average 0.25
    assert result.stats["fallback_states"] == 3
    assert result.values[0] == pytest.approx(np.full(len(queries[0].trajectory.token_ids), expected))
