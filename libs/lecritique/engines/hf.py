"""Rollout engine on Hugging Face transformers: batched ``generate`` with a KV cache.

Prompts are left-padded into batches of at most ``max_batch_size`` sequences (each prompt is
repeated ``n`` times). The sampled tokens' raw logprobs are recorded during generation by a
logits processor that runs before temperature/top-p are applied (transformers applies the
sampling warpers after user processors), so no second forward pass is needed and only one step
of ``[batch, vocab]`` log-probabilities is kept at a time.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, PreTrainedModel

from lecritique.engines.base import (
    Completion,
    FinishReason,
    Prompts,
    SamplingParams,
    encode_prompts,
    stop_ids,
    validate_prompts,
)
from lecritique.engines.config import HFEngineConfig
from lecritique.models.policy import load_policy

logger = logging.getLogger(__name__)


class _SampledTokenLogprobs(LogitsProcessor):
    """Records log_softmax(raw logits)[sampled token] at every step, one step behind.

    The processor sees the raw logits of step t before the token of step t is chosen; the chosen
    token appears in ``input_ids`` at step t+1 (or in the final sequences for the last step).
    """

    def __init__(self) -> None:
        self._pending: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._take(input_ids[:, -1])
        self._pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        if self._pending is not None:
            self.steps.append(self._pending.gather(-1, tokens[:, None].long())[:, 0])
            self._pending = None

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        """``[batch, steps]`` logprobs, given the final sequences."""
        self._take(sequences[:, -1])
        if not self.steps:
            return torch.zeros(sequences.shape[0], 0)
        return torch.stack(self.steps, dim=1)


class HFEngine:
    """Batched sampling with ``model.generate``; weights swapped by reloading the directory."""

    def __init__(
        self, config: HFEngineConfig, model: PreTrainedModel | None = None, tokenizer: Any = None
    ) -> None:
        self.config = config
        self.version = 0
        if model is None or tokenizer is None:
            if config.model_path is None:
                raise ValueError("hf engine config has no model_path; set it to the policy's model directory")
            model, tokenizer = load_policy(config.model_path, config.dtype)
        self.model: Any = _on_device(model, config.device)
        self.tokenizer = tokenizer
        self.model_path = config.model_path
        self._generator_seed = config.seed
        self._calls = 0

    @classmethod
    def from_model(cls, model: PreTrainedModel, tokenizer: Any, max_batch_size: int = 256) -> HFEngine:
        """Wrap an in-memory model (e.g. during a supervised warm start) without saving it."""
        device = str(next(model.parameters()).device)
        config = HFEngineConfig(model_path="<in-memory>", device=device, max_batch_size=max_batch_size)
        return cls(config, model=model, tokenizer=tokenizer)

    def info(self) -> dict[str, Any]:
        return {
            "backend": "hf",
            "model_path": self.model_path,
            "weights_version": self.version,
            "device": self.config.device,
            "dtype": self.config.dtype,
            "max_batch_size": self.config.max_batch_size,
            "max_position_embeddings": getattr(self.model.config, "max_position_embeddings", None),
        }

    def close(self) -> None:
        """Release the model (nothing runs in the background)."""
        self.model = None

    def load_weights(self, version: int, path: str) -> None:
        model, _ = load_policy(path, self.config.dtype)
        self.model = _on_device(model, self.config.device)
        self.model_path = str(path)
        self.version = version
        logger.info("hf engine: loaded weights version %d from %s", version, path)

    def generate(
        self, prompts: Prompts, n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        sampling = sampling or SamplingParams()
        validate_prompts(prompts, n)
        prompt_ids = encode_prompts(prompts, self.tokenizer)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        for index, ids in enumerate(prompt_ids):
            if limit is not None and len(ids) + sampling.max_tokens > limit:
                raise ValueError(
                    f"prompt {index} has {len(ids)} tokens; with max_tokens={sampling.max_tokens} it exceeds "
                    f"the model's max_position_embeddings={limit}"
                )
        requests = [(index, ids) for index, ids in enumerate(prompt_ids) for _ in range(n)]
        results: list[list[Completion]] = [[] for _ in prompt_ids]
        seed = sampling.seed if sampling.seed is not None else self._generator_seed + self._calls
        self._calls += 1
        # A private RNG stream: sampling here must not disturb (or depend on) the caller's RNG.
        devices = [self.model.device] if self.model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            for start in range(0, len(requests), self.config.max_batch_size):
                chunk = requests[start : start + self.config.max_batch_size]
                completions = self._generate_batch([ids for _, ids in chunk], sampling)
                for (index, _), completion in zip(chunk, completions, strict=True):
                    results[index].append(completion)
        return results

    @torch.inference_mode()
    def _generate_batch(self, batch: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        pad_id = self.tokenizer.pad_token_id
        width = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        stops = stop_ids(sampling, self.tokenizer.eos_token_id)
        generation_config = self._generation_config(sampling, stops)
        recorder = _SampledTokenLogprobs()
        device = self.model.device
        output = self.model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            generation_config=generation_config,
            logits_processor=LogitsProcessorList([recorder]),
        )
        sequences = output.sequences[:, width:].cpu()
        logprobs = recorder.finish(output.sequences).cpu()
        return [
            self._completion(sequences[row].tolist(), logprobs[row], set(stops)) for row in range(len(batch))
        ]

    def _generation_config(self, sampling: SamplingParams, stops: list[int]) -> GenerationConfig:
        # Every sampling field is set explicitly: generate() fills unset ones from the checkpoint's
        # generation_config.json (e.g. repetition_penalty, top_k=20) and then from global defaults
        # (top_k=50), which would make this backend sample differently from vLLM.
        sampling_fields: dict[str, Any] = {}
        if not sampling.greedy:
            sampling_fields = {
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
                "top_k": sampling.top_k if sampling.top_k > 0 else 0,
                "min_p": 0.0,
                "typical_p": 1.0,
                "epsilon_cutoff": 0.0,
                "eta_cutoff": 0.0,
            }
        return GenerationConfig(  # type: ignore[no-untyped-call]
            do_sample=not sampling.greedy,
            **sampling_fields,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_length=0,
            num_beams=1,
            max_new_tokens=sampling.max_tokens,
            eos_token_id=stops,
            pad_token_id=self.tokenizer.pad_token_id,
            bos_token_id=self.tokenizer.bos_token_id,
            use_cache=True,
            return_dict_in_generate=True,
        )

    def _completion(self, tokens: list[int], logprobs: torch.Tensor, stop_set: set[int]) -> Completion:
        """One sampled row cut after its first stop token."""
        length, finish = len(tokens), "length"
        for position, token in enumerate(tokens):
            if token in stop_set:
                length, finish = position + 1, "stop"
                break
        reason: FinishReason = "stop" if finish == "stop" else "length"
        token_ids = tokens[:length]
        return Completion(
            token_ids=token_ids,
            logprobs=[float(x) for x in logprobs[:length]],
            text=self.tokenizer.decode(token_ids, skip_special_tokens=True),
            finish_reason=reason,
            metadata={"weights_version": self.version},
        )


def _on_device(model: PreTrainedModel, device: str) -> Any:
    """The model on ``device`` in eval mode (``to`` is untyped in transformers' stubs)."""
    movable: Any = model
    return movable.to(torch.device(device)).eval()
