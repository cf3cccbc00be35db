"""Rollout throughput: vLLM (CPU build here) next to HF ``generate`` on the same tiny model.

    python bench/rollout.py [--batch 128] [--tokens 64] [--pairs 5] [--model DIR] [--json out.json]

Both engines decode ``batch`` prompts x ``tokens`` new tokens (EOS ignored, so every completion
has exactly ``tokens`` tokens) at temperature 1. Runs alternate vLLM/HF in pairs after one
warm-up each and medians are reported, so load from other processes on a shared machine hits one
pair rather than one side. Without ``--model`` the model is an untrained tiny Llama of the
``build-tiny`` shape (throughput does not depend on the weights). vLLM start-up time is reported
separately and not counted in tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs")]
# Spinning OpenMP waits make HF generate (2 threads) collapse when other jobs share the cores;
# vLLM's engine runs one thread. Passive waiting (read when torch loads) keeps the comparison fair.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from lecritique.engines import HFEngineConfig, SamplingParams, VLLMEngineConfig  # noqa: E402
from lecritique.engines.hf import HFEngine  # noqa: E402
from lecritique.engines.vllm import VLLMEngine  # noqa: E402
from lecritique.models.tiny_arch import write_random_tiny_policy  # noqa: E402

SUDOKU_ALPHABET = "1234.\nrc="


def _prompts(batch: int, tokenizer: object, rng: random.Random) -> list[list[int]]:
    """4x4 Sudoku-like prompts (20 characters + BOS), all different."""
    prompts = []
    for _ in range(batch):
        rows = ["".join(rng.choice("1234.") for _ in range(4)) + "\n" for _ in range(4)]
        prompts.append(tokenizer.encode("".join(rows), add_special_tokens=True))  # type: ignore[attr-defined]
    return prompts


def _timed(
    engine: HFEngine | VLLMEngine, prompts: list[list[int]], sampling: SamplingParams
) -> tuple[float, int]:
    start = time.perf_counter()
    groups = engine.generate(prompts, n=1, sampling=sampling)
    seconds = time.perf_counter() - start
    tokens = sum(len(c.token_ids) for group in groups for c in group)
    return seconds, tokens


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "--model", type=Path, default=None, help="HF model directory (default: random tiny Llama)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    console = Console(stderr=True)

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model or write_random_tiny_policy(Path(scratch) / "tiny", SUDOKU_ALPHABET, seed=0)
        hf = HFEngine(HFEngineConfig(model_path=str(model_dir), max_batch_size=args.batch))
        started = time.perf_counter()
        vllm = VLLMEngine(VLLMEngineConfig(model_path=str(model_dir), max_model_len=256))
        vllm_start_seconds = time.perf_counter() - started
        prompts = _prompts(args.batch, hf.tokenizer, random.Random(0))
        sampling = SamplingParams(temperature=1.0, max_tokens=args.tokens, ignore_eos=True, seed=0)
        rates: dict[str, list[float]] = {"vllm": [], "hf": []}
        with Progress(console=console, transient=True) as progress:
            bar = progress.add_task("rollout bench", total=2 * (args.pairs + 1))
            for engine in (vllm, hf):
                _timed(engine, prompts, sampling)  # warm-up
                progress.advance(bar)
            for _ in range(args.pairs):
                for name, engine in (("vllm", vllm), ("hf", hf)):
                    seconds, tokens = _timed(engine, prompts, sampling)
                    if tokens != args.batch * args.tokens:
                        raise RuntimeError(
                            f"{name} generated {tokens} tokens, expected {args.batch * args.tokens}"
                        )
                    rates[name].append(tokens / seconds)
                    progress.advance(bar)
        vllm.close()

    result = {
        "batch": args.batch,
        "new_tokens": args.tokens,
        "pairs": args.pairs,
        "model": str(args.model) if args.model else "random tiny Llama (hidden 128, 2 layers, 4 heads)",
        "vllm_tokens_per_s": statistics.median(rates["vllm"]),
        "hf_tokens_per_s": statistics.median(rates["hf"]),
        "vllm_over_hf": statistics.median(v / h for v, h in zip(rates["vllm"], rates["hf"], strict=True)),
        "vllm_start_seconds": vllm_start_seconds,
        "runs": rates,
    }
    table = Table(
        title=f"rollout: batch {args.batch} x {args.tokens} new tokens (median of {args.pairs} pairs)"
    )
    table.add_column("backend")
    table.add_column("tokens/s", justify="right")
    table.add_row("vLLM (CPU)", f"{result['vllm_tokens_per_s']:,.0f}")
    table.add_row("HF generate", f"{result['hf_tokens_per_s']:,.0f}")
    table.add_row("vLLM / HF", f"{result['vllm_over_hf']:.2f}")
    Console().print(table)
    console.print(f"vLLM engine start: {vllm_start_seconds:.1f} s (not counted)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
