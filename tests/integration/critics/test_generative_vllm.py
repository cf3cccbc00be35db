"""The generative critic generating on vLLM (CPU build), as on the HF engine, with in-place swaps."""

import pytest
from pydantic import TypeAdapter

from lecritique.critics.config import GenerativeCriticConfig
from lecritique.critics.generative import GenerativeCritic, critic_sampling, state_prompts
from lecritique.critics.states import trajectory_states
from lecritique.critics.types import ActorInfo, CriticQuery, Peer
from lecritique.engines import EngineConfig
from lecritique.engines.vllm import VLLMEngine
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
from tests.unit.critics.conftest import ASCII, text_trajectory

pytestmark = pytest.mark.slow


def test_vllm_and_hf_critics_score_alike_and_vllm_swaps_versions_in_place(
    ascii_model, ascii_tokenizer, tmp_path
):
    architecture = TinyArchitecture(
        hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128, max_positions=2048
    )
    version_1 = write_random_tiny_policy(tmp_path / "v1", ASCII, seed=5, architecture=architecture)
    queries = [
        CriticQuery(
            text_trajectory(ascii_tokenizer, "2+2=?", ["It is 4. Sure.", "yes"], 1.0),
            peers=(Peer("b", "x", 0.0),),
        ),
        CriticQuery(
            text_trajectory(ascii_tokenizer, "3+3=?", ["six. I think"], 0.0), peers=(Peer("a", "y", 1.0),)
        ),
    ]
    actor = ActorInfo("0.1M llama", 0.5)
    # Greedy, direct scoring: both engines must produce the same completions, hence the same values.
    base = dict(temperature=0.0, reasoning=False, max_tokens=4)
    vllm_engine = TypeAdapter(EngineConfig).validate_python({"kind": "vllm", "max_model_len": 512})
    on_vllm = GenerativeCritic(
        GenerativeCriticConfig(**base, engine=vllm_engine), ascii_model, policy_dir=ascii_model
    )
    assert isinstance(on_vllm.generator.engine, VLLMEngine)
    try:
        for version, path in ((0, ascii_model), (1, version_1)):
            if version:
                on_vllm.reload(version, path)  # no engine restart
            on_hf = GenerativeCritic(
                GenerativeCriticConfig(**base), path, policy_dir=ascii_model, version=version
            )
            texts = [trajectory_states(q.trajectory, ascii_tokenizer, "sentence", 16) for q in queries]
            prompts = [
                ascii_tokenizer.encode(p) for t in texts for p in state_prompts(on_hf.config, t, actor)
            ]
            sampling = critic_sampling(on_hf.config)
            hf_completions = on_hf.generator.generate(prompts, sampling).completions
            vllm_completions = on_vllm.generator.generate(prompts, sampling).completions
            assert [c[0].token_ids for c in vllm_completions] == [c[0].token_ids for c in hf_completions]
            expected = on_hf.values(queries, actor)
            result = on_vllm.values(queries, actor)
            assert result.version == version
            for got, want in zip(result.values, expected.values, strict=True):
                assert got.tolist() == want.tolist()
            assert result.stats["parse_failures"] == expected.stats["parse_failures"]
            on_hf.close()
    finally:
        on_vllm.close()
