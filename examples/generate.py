"""Write one experiment spec per (environment, baseline) pair into ``examples/<environment>/``.

    python examples/generate.py        # regenerate; tests/unit/config/test_examples.py checks they are current

Baselines (Le Critique §4-§6): ``mean`` (GRPO), ``rloo``, ``vf`` (value baseline, ordinary critic),
``pvf`` (value baseline, privileged critic), ``gae``, ``tether`` (LOO mixed with a plain value
function, ``context: none``, as in the paper), ``tether-pvf`` (mixed with the privileged critic),
``evpo``, and ``lvrl`` where it is LVRL: a multi-turn environment (BabyAI-text) whose frozen
critic is a capable LLM behind an OpenAI-compatible endpoint, shown the group (LVRL's setup). On a
single-turn task LVRL scores one state per response, anchored to the group's mean and the reward:
its advantage is R - mean(R), i.e. GRPO (``mean``), so no single-turn ``lvrl.yaml`` is written.
CPU environments use tiny models built on first use; GPU environments name a Hugging Face
checkpoint directory and the vLLM engine.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent

# A 4B instruct model served by vLLM, as in Le Critique Appendix D (mount it at this path).
GPU_POLICY = {"path": "/models/Qwen3-4B-Instruct-2507", "template": {"kind": "chat"}}
GPU_ROLLOUT = {"engine": {"kind": "vllm", "dtype": "bfloat16", "max_model_len": 8192}}
# LVRL's frozen critic: a capable hosted model (the paper prices its queries at Claude Opus 4.6's
# rates, $5 / $25 per million tokens: ~11.9k prompt and ~1.9k completion tokens per BabyAI query).
LVRL_CRITIC = {
    "kind": "frozen_llm",
    "llm": {
        "kind": "openai",
        "base_url": "https://api.anthropic.com/v1",
        "model": "claude-opus-4-6",
        "api_key_env": "ANTHROPIC_API_KEY",
        "timeout_seconds": 300,
        "max_retries": 4,
        "concurrency": 16,
        "prompt_price_per_million": 5.0,
        "completion_price_per_million": 25.0,
    },
    # One state per action (turn); max_segments unset: no turn merges into another's state.
    "segments": {"rule": "turn"},
    "max_tokens": 4096,
}
GPU_TRAINER = {"optimizer": {"lr": 1.0e-6}, "dtype": "bfloat16", "processes": 8}
GPU_CRITIC = {"optimizer": {"lr": 1.0e-5}, "dtype": "bfloat16"}

ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "sudoku-mini": {
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
        "policy": {"tiny": "sudoku-mini"},
        "rollout": {"group_size": 4, "tasks_per_step": 32, "sampling": {"max_tokens": 8}},
        "policy_trainer": {"optimizer": {"lr": 1.0e-4, "weight_decay": 0.0}},
        "critic": {"optimizer": {"lr": 1.0e-4}},
        "privileged": "reference",
        "steps": 300,
    },
    "arithmetic": {
        "environment": {"kind": "arithmetic"},
        "policy": {"tiny": "arithmetic"},
        "rollout": {"group_size": 4, "tasks_per_step": 32, "sampling": {"max_tokens": 8}},
        "policy_trainer": {"optimizer": {"lr": 1.0e-4, "weight_decay": 0.0}},
        "critic": {"optimizer": {"lr": 1.0e-4}},
        "privileged": "reference",
        "steps": 300,
    },
    "countdown": {
        "environment": {"kind": "countdown"},
        "policy": GPU_POLICY,
        "rollout": {**GPU_ROLLOUT, "group_size": 8, "tasks_per_step": 16, "sampling": {"max_tokens": 2048}},
        "policy_trainer": GPU_TRAINER,
        "critic": GPU_CRITIC,
        "privileged": "reference",
        "steps": 400,
    },
    "reasoning-gym": {
        "environment": {
            "kind": "reasoning_gym",
            "datasets": {"basic_arithmetic": 1, "chain_sum": 1, "leg_counting": 1},
        },
        "policy": GPU_POLICY,
        "rollout": {**GPU_ROLLOUT, "group_size": 8, "tasks_per_step": 16, "sampling": {"max_tokens": 6144}},
        "policy_trainer": GPU_TRAINER,
        "critic": GPU_CRITIC,
        "privileged": "reference",
        "steps": 800,
    },
    "codeio": {
        "environment": {"kind": "codeio"},
        "policy": GPU_POLICY,
        # Le Critique D.1: 4,096 prompt tokens + 8,192 generated ones (a 12,288-token sequence limit).
        "rollout": {
            "engine": {**GPU_ROLLOUT["engine"], "max_model_len": 12288},
            "group_size": 4,
            "tasks_per_step": 32,
            "sampling": {"max_tokens": 8192},
        },
        "policy_trainer": GPU_TRAINER,
        "critic": GPU_CRITIC,
        # Le Critique's CodeIO PVF conditions on the other K-1 responses and their rewards.
        "privileged": "loo_group",
        "steps": 650,
    },
    "babyai-text": {
        "environment": {"kind": "babyai_text"},
        "policy": GPU_POLICY,
        # Up to 100 turns of <= 256 tokens plus ~80-token observations: a 32k context holds an episode.
        "rollout": {
            "engine": {**GPU_ROLLOUT["engine"], "max_model_len": 32768},
            "group_size": 8,
            "tasks_per_step": 16,
            "sampling": {"max_tokens": 256},
        },
        "policy_trainer": GPU_TRAINER,
        "critic": GPU_CRITIC,
        "privileged": "reference",
        "steps": 150,
        "lvrl_critic": LVRL_CRITIC,
    },
}

BASELINES: dict[str, tuple[dict[str, Any], str | None]] = {
    "mean": ({"name": "mean"}, None),
    "rloo": ({"name": "rloo"}, None),
    "vf": ({"name": "value"}, "none"),
    "pvf": ({"name": "value"}, "privileged"),
    "gae": ({"name": "gae", "lambda_gae": 1.0, "lambda_target": 1.0}, "none"),
    "tether": ({"name": "tether", "ema_decay": 0.95}, "none"),
    "tether-pvf": ({"name": "tether", "ema_decay": 0.95}, "privileged"),
    "evpo": ({"name": "evpo"}, "none"),
    "lvrl": ({"name": "lvrl"}, "frozen_llm"),
}
"""baseline -> (estimator, critic context; ``frozen_llm``: LVRL's frozen critic; None: no critic)."""


def baselines(environment: str) -> list[str]:
    """The baselines shipped for ``environment``: ``lvrl`` only where the environment names its LVRL critic."""
    return [b for b in BASELINES if b != "lvrl" or "lvrl_critic" in ENVIRONMENTS[environment]]


def spec_for(environment: str, baseline: str) -> dict[str, Any]:
    settings = copy.deepcopy(ENVIRONMENTS[environment])
    estimator, context = BASELINES[baseline]
    spec: dict[str, Any] = {
        "name": f"{environment}-{baseline}",
        "seed": 0,
        "environment": settings["environment"],
        "policy": settings["policy"],
        "rollout": settings["rollout"],
        "estimator": estimator,
        "policy_trainer": settings["policy_trainer"],
        "orchestrator": {"steps": settings["steps"], "max_off_policy_steps": 8},
    }
    if context == "frozen_llm":
        if "lvrl_critic" not in settings:
            raise ValueError(
                f"{environment} ships no lvrl example: on a single-turn task LVRL is GRPO (use mean)"
            )
        # LVRL: a frozen LLM reads the other K-1 attempts and their rewards and scores every turn
        # in hindsight (lvrl only), anchored to the group's success rate and the reward.
        spec["critic"] = {
            **copy.deepcopy(settings["lvrl_critic"]),
            "max_peers": settings["rollout"]["group_size"] - 1,
        }
    elif context is not None:
        kind = settings["privileged"] if context == "privileged" else context
        spec["critic"] = {
            **settings["critic"],
            "context": kind,
            "warmup_updates": 20,
            "replay": {"capacity": 256, "max_reuse": 2},
        }
    return spec


def main() -> None:
    for environment in ENVIRONMENTS:
        folder = HERE / environment
        folder.mkdir(exist_ok=True)
        for stale in set(BASELINES) - set(baselines(environment)):
            (folder / f"{stale}.yaml").unlink(missing_ok=True)
        for baseline in baselines(environment):
            text = f"# Generated by examples/generate.py: {environment}, {baseline} baseline.\n"
            text += yaml.safe_dump(spec_for(environment, baseline), sort_keys=False)
            (folder / f"{baseline}.yaml").write_text(text)


if __name__ == "__main__":
    main()
