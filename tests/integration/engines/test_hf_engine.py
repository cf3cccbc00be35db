"""The Hugging Face rollout engine on its own: batching, padding, sampling, logprobs, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter

from lecritique.engines import (
    EngineConfig,
    HFEngineConfig,
    RolloutEngine,
    SamplingParams,
    build_engine,
)
from lecritique.engines.hf import HFEngine
from lecritique.models.policy import load_policy
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy

ALPHABET = "0123456789+-= abcdefghij\n"
# A larger init scale than training uses: peaked next-token distributions make greedy decoding
# far from ties, so tiny float differences cannot flip a token.
ARCHITECTURE = TinyArchitecture(initializer_range=0.2)
PROMPTS = ["12+3=", "abc", "9-4=\nj", "7"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_tiny_policy(
        tmp_path_factory.mktemp("tiny") / "policy", ALPHABET, seed=0, architecture=ARCHITECTURE
    )


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> HFEngine:
    return HFEngine(HFEngineConfig(model_path=str(model_dir), max_batch_size=64))


def teacher_forced_logprobs(
    model_dir: Path, prompt_ids: list[int], completion_ids: list[int]
) -> torch.Tensor:
    model, _ = load_policy(model_dir)
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    positions = torch.arange(len(prompt_ids) - 1, len(prompt_ids) - 1 + len(completion_ids))
    return logprobs[positions, torch.tensor(completion_ids)]


def test_build_engine_from_config_union(model_dir: Path) -> None:
    config = TypeAdapter(EngineConfig).validate_python({"kind": "hf", "model_path": str(model_dir)})
    engine = build_engine(config)
    assert isinstance(engine, HFEngine)
    assert isinstance(engine, RolloutEngine)
    assert engine.info()["backend"] == "hf"
    with pytest.raises(ValueError, match="kind"):
        TypeAdapter(EngineConfig).validate_python({"kind": "tgi", "model_path": str(model_dir)})


def test_left_padded_batches_equal_one_prompt_at_a_time(engine: HFEngine, model_dir: Path) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=16)
    batched = engine.generate(PROMPTS, n=2, sampling=greedy)
    small_batches = HFEngine(HFEngineConfig(model_path=str(model_dir), max_batch_size=3)).generate(
        PROMPTS, n=2, sampling=greedy
    )
    assert [len(group) for group in batched] == [2] * len(PROMPTS)
    for prompt, group, other in zip(PROMPTS, batched, small_batches, strict=True):
        alone = engine.generate([prompt], n=1, sampling=greedy)[0][0]
        for completion in [*group, *other]:
            assert completion.token_ids == alone.token_ids
            assert completion.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_logprobs_are_raw_model_logprobs_of_sampled_tokens(engine: HFEngine, model_dir: Path) -> None:
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=20, seed=5)
    tokenizer = engine.tokenizer
    for prompt, group in zip(PROMPTS, engine.generate(PROMPTS, n=3, sampling=sampling), strict=True):
        prompt_ids = tokenizer.encode(prompt, add_special_tokens=True)
        for completion in group:
            assert len(completion.logprobs) == len(completion.token_ids) >= 1
            expected = teacher_forced_logprobs(model_dir, prompt_ids, completion.token_ids)
            assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


def test_stop_tokens_end_completions_and_are_kept(engine: HFEngine) -> None:
    long = engine.generate(
        ["12+3="], sampling=SamplingParams(temperature=0.0, max_tokens=30, ignore_eos=True)
    )[0][0]
    assert len(long.token_ids) == 30 and long.finish_reason == "length"
    stop_token = long.token_ids[3]
    first = long.token_ids.index(stop_token)
    stopped = engine.generate(
        ["12+3="],
        sampling=SamplingParams(temperature=0.0, max_tokens=30, ignore_eos=True, stop_token_ids=[stop_token]),
    )[0][0]
    assert stopped.token_ids == long.token_ids[: first + 1]
    assert stopped.finish_reason == "stop"
    short = engine.generate(
        ["12+3="], sampling=SamplingParams(temperature=0.0, max_tokens=2, ignore_eos=True)
    )[0][0]
    assert short.token_ids == long.token_ids[:2] and short.finish_reason == "length"


def test_eos_ends_a_completion_and_text_excludes_it(engine: HFEngine) -> None:
    eos = engine.tokenizer.eos_token_id
    completions = [
        c
        for group in engine.generate(PROMPTS, n=8, sampling=SamplingParams(max_tokens=40, seed=1))
        for c in group
    ]
    ended = [c for c in completions if c.finish_reason == "stop"]
    assert ended, "an untrained model with a 29-token vocabulary emits EOS within 40 tokens"
    for completion in ended:
        assert completion.token_ids[-1] == eos and eos not in completion.token_ids[:-1]
        assert completion.text == engine.tokenizer.decode(completion.token_ids[:-1], skip_special_tokens=True)
    for completion in completions:
        if completion.finish_reason == "length":
            assert len(completion.token_ids) == 40 and eos not in completion.token_ids


def test_seeded_sampling_is_reproducible_and_private(engine: HFEngine) -> None:
    sampling = SamplingParams(temperature=1.0, max_tokens=12, seed=42)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    first = engine.generate(["abc"], n=4, sampling=sampling)[0]
    after = torch.rand(1)
    assert torch.equal(before, after), "generate must not consume the caller's random stream"
    second = engine.generate(["abc"], n=4, sampling=sampling)[0]
    assert [c.token_ids for c in first] == [c.token_ids for c in second]
    assert len({tuple(c.token_ids) for c in first}) > 1, "n samples of one prompt differ"
    unseeded = [engine.generate(["abc"], n=4, sampling=SamplingParams(max_tokens=12))[0] for _ in range(2)]
    assert [c.token_ids for c in unseeded[0]] != [c.token_ids for c in unseeded[1]]


def test_load_weights_switches_the_model(engine: HFEngine, tmp_path: Path, model_dir: Path) -> None:
    other_dir = write_random_tiny_policy(tmp_path / "other", ALPHABET, seed=1, architecture=ARCHITECTURE)
    greedy = SamplingParams(temperature=0.0, max_tokens=16)
    before = [g[0].token_ids for g in engine.generate(PROMPTS, sampling=greedy)]
    fresh = [
        g[0].token_ids
        for g in HFEngine(HFEngineConfig(model_path=str(other_dir))).generate(PROMPTS, sampling=greedy)
    ]
    assert before != fresh
    engine.load_weights(3, str(other_dir))
    try:
        after = engine.generate(PROMPTS, sampling=greedy)
        assert [g[0].token_ids for g in after] == fresh
        assert after[0][0].metadata["weights_version"] == 3
        assert engine.info()["weights_version"] == 3
    finally:
        engine.load_weights(0, str(model_dir))
    assert [g[0].token_ids for g in engine.generate(PROMPTS, sampling=greedy)] == before


def test_bad_requests_are_rejected_with_clear_errors(engine: HFEngine) -> None:
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate([[5, 6], []])
    with pytest.raises(ValueError, match="n must be >= 1"):
        engine.generate(["abc"], n=0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        engine.generate([[5, 10_000]])
    with pytest.raises(ValueError, match="max_position_embeddings=512"):
        engine.generate(["1" * 500], sampling=SamplingParams(max_tokens=20))
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
