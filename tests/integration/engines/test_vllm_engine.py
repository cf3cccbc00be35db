"""vLLM (CPU build) and the HF engine on the same tiny model: same tokens, same logprobs, same
weight-update behaviour. Starts one real vLLM engine for the whole module (~25-40 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import vllm  # noqa: F401  (the vllm extra `make test` installs: a missing vLLM fails, never skips)
from pydantic import TypeAdapter

from lecritique.engines import (
    EngineConfig,
    HFEngineConfig,
    RolloutEngine,
    SamplingParams,
    build_engine,
)
from lecritique.engines.hf import HFEngine
from lecritique.engines.vllm import VLLMEngine
from lecritique.models.policy import load_policy
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy

pytestmark = pytest.mark.slow

ALPHABET = "0123456789+-= abcdefghij\n"
ARCHITECTURE = TinyArchitecture(initializer_range=0.2)
PROMPTS: list[str] = ["12+3=", "abc", "9-4=\nj", "7", "hello 12 3+4+5+6+7=ab"]
LOGPROB_TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tiny-vllm")
    first = write_random_tiny_policy(root / "a", ALPHABET, seed=0, architecture=ARCHITECTURE)
    second = write_random_tiny_policy(root / "b", ALPHABET, seed=1, architecture=ARCHITECTURE)
    return first, second


@pytest.fixture(scope="module")
def vllm_engine(model_dirs: tuple[Path, Path]) -> Iterator[VLLMEngine]:
    config = TypeAdapter(EngineConfig).validate_python(
        {"kind": "vllm", "model_path": str(model_dirs[0]), "max_model_len": 128}
    )
    engine = build_engine(config)
    assert isinstance(engine, VLLMEngine)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def hf_engine(model_dirs: tuple[Path, Path]) -> HFEngine:
    return HFEngine(HFEngineConfig(model_path=str(model_dirs[0])))


def test_both_backends_implement_the_interface(vllm_engine: VLLMEngine, hf_engine: HFEngine) -> None:
    assert isinstance(vllm_engine, RolloutEngine) and isinstance(hf_engine, RolloutEngine)
    assert vllm_engine.info()["backend"] == "vllm" and hf_engine.info()["backend"] == "hf"


def test_greedy_tokens_identical_and_logprobs_agree(vllm_engine: VLLMEngine, hf_engine: HFEngine) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    token_prompts = [hf_engine.tokenizer.encode(p) for p in PROMPTS]
    for prompts in (PROMPTS, token_prompts):
        from_vllm = vllm_engine.generate(prompts, n=2, sampling=greedy)
        from_hf = hf_engine.generate(prompts, n=2, sampling=greedy)
        assert [len(g) for g in from_vllm] == [2] * len(PROMPTS)
        for group_vllm, group_hf in zip(from_vllm, from_hf, strict=True):
            for ours, theirs in zip(group_vllm, group_hf, strict=True):
                assert ours.token_ids == theirs.token_ids
                assert ours.finish_reason == theirs.finish_reason
                assert ours.text == theirs.text
                assert ours.logprobs == pytest.approx(theirs.logprobs, abs=LOGPROB_TOLERANCE)
    finished = {c.finish_reason for g in from_vllm for c in g}
    assert finished == {"stop", "length"}, "the prompts exercise both ways a completion ends"


def test_sampled_logprobs_are_raw_model_logprobs(
    vllm_engine: VLLMEngine, model_dirs: tuple[Path, Path]
) -> None:
    """vLLM reports temperature-1 logprobs of what it sampled at temperature 0.7 / top-p 0.9, like HF."""
    model, tokenizer = load_policy(model_dirs[0])
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=20, seed=3)
    groups = vllm_engine.generate(PROMPTS, n=3, sampling=sampling)
    for prompt, group in zip(PROMPTS, groups, strict=True):
        assert len(group) == 3
        prompt_ids = tokenizer.encode(prompt)
        for completion in group:
            ids = torch.tensor([prompt_ids + completion.token_ids])
            with torch.no_grad():
                logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
            start = len(prompt_ids) - 1
            expected = [float(logprobs[start + i, t]) for i, t in enumerate(completion.token_ids)]
            assert completion.logprobs == pytest.approx(expected, abs=LOGPROB_TOLERANCE)
    again = vllm_engine.generate(PROMPTS, n=3, sampling=sampling)
    assert [[c.token_ids for c in g] for g in again] == [[c.token_ids for c in g] for g in groups]
    assert any(len({tuple(c.token_ids) for c in g}) > 1 for g in groups), "n samples of a prompt differ"


def test_stop_token_ids_agree(vllm_engine: VLLMEngine, hf_engine: HFEngine) -> None:
    sampling = SamplingParams(temperature=0.0, max_tokens=30, ignore_eos=True)
    long = hf_engine.generate(["12+3="], sampling=sampling)[0][0]
    assert vllm_engine.generate(["12+3="], sampling=sampling)[0][0].token_ids == long.token_ids
    stop = long.token_ids[4]
    with_stop = sampling.model_copy(update={"stop_token_ids": [stop]})
    from_vllm = vllm_engine.generate(["12+3="], sampling=with_stop)[0][0]
    from_hf = hf_engine.generate(["12+3="], sampling=with_stop)[0][0]
    assert from_vllm.token_ids == from_hf.token_ids == long.token_ids[: long.token_ids.index(stop) + 1]
    assert from_vllm.finish_reason == from_hf.finish_reason == "stop"


def test_prompt_longer_than_the_engine_allows_is_rejected(vllm_engine: VLLMEngine) -> None:
    with pytest.raises(ValueError, match="max_model_len"):
        vllm_engine.generate(["1" * 120], sampling=SamplingParams(max_tokens=20))
    with pytest.raises(ValueError, match="prompt 0 is empty"):
        vllm_engine.generate([[]])


def test_weight_update_changes_output_like_a_fresh_engine(
    vllm_engine: VLLMEngine, hf_engine: HFEngine, model_dirs: tuple[Path, Path]
) -> None:
    first_dir, second_dir = model_dirs
    greedy = SamplingParams(temperature=0.0, max_tokens=24)
    before = [g[0].token_ids for g in vllm_engine.generate(PROMPTS, sampling=greedy)]
    fresh_on_second = [
        g[0].token_ids
        for g in HFEngine(HFEngineConfig(model_path=str(second_dir))).generate(PROMPTS, sampling=greedy)
    ]
    assert before != fresh_on_second, (
        "the two weight sets must behave differently for this test to mean anything"
    )

    for engine in (vllm_engine, hf_engine):
        engine.load_weights(5, str(second_dir))
    after_vllm = vllm_engine.generate(PROMPTS, sampling=greedy)
    after_hf = hf_engine.generate(PROMPTS, sampling=greedy)
    assert [g[0].token_ids for g in after_vllm] == fresh_on_second
    assert [g[0].token_ids for g in after_hf] == fresh_on_second
    for ours, theirs in zip(after_vllm, after_hf, strict=True):
        assert ours[0].logprobs == pytest.approx(theirs[0].logprobs, abs=LOGPROB_TOLERANCE)
    assert vllm_engine.info()["weights_version"] == 5 and after_vllm[0][0].metadata["weights_version"] == 5

    # Back to the first weights: equal to the original output only if no KV computed with the
    # second weights is reused from the prefix cache.
    for engine in (vllm_engine, hf_engine):
        engine.load_weights(6, str(first_dir))
    assert [g[0].token_ids for g in vllm_engine.generate(PROMPTS, sampling=greedy)] == before
