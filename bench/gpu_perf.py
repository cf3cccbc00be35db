"""The GPU path's speed against the chip's own matmul rate (issue #38); ``--device cpu`` is a dry run.

    python bench/gpu_perf.py [--device auto|cuda|cpu] [--out PATH] [--hidden 2048 --layers 16]
                             [--rows 32 --prompt 64 --response-min 512 --response-max 1024]

Stages, in one process: the matmul peak first (bf16 on CUDA, float32 on CPU: 2 n^3 FLOPs per
n x n product), then the project's own classes on a random tiny-arch Llama: the policy trainer
with FSDP2 (world size 1) + bf16 + activation checkpointing, the policy trainer plain (no FSDP2,
no checkpointing) with packed micro-batches (the default) and padded ones (``packing: false``;
tokens/s counts real tokens, so their ratio is packing's useful-token speed-up), the critic trainer (FSDP2 + checkpointing, same backbone and batch), the
critic's ``predict`` (forward only), the HF rollout engine's ``generate``, and the weight
transport (``bench/gpu_check_procs.transport_timing``: broadcast over gloo to a replica process,
and publish + HF load through the volume). Training stages count model FLOPs per token as
6 N + 6 layers hidden seq (causal attention; recompute not counted), forward-only 2 N +
2 layers hidden seq; each stage reports tokens/s and that rate's fraction of the measured peak.

On CUDA the result goes to docs/bench-gpu.json (the README's GPU table is generated from it by
``bench/gpu_table.py``); a CPU run writes only to ``--out`` (default under the system's temp
directory) and never to docs/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "libs"), str(REPO_ROOT / "bench")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

DOCS_JSON = REPO_ROOT / "docs" / "bench-gpu.json"
ALPHABET = "1234.\nrc="


def matmul_peak(device: str, size: int, repeats: int) -> dict[str, Any]:
    """FLOP/s of n x n matmuls: bf16 on CUDA, float32 on CPU; the best of ``repeats`` timed rounds."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    rounds = 10 if device == "cuda" else 3
    best = math.inf
    for _ in range(repeats + 1):  # the first round warms up
        _sync(device)
        started = time.perf_counter()
        for _ in range(rounds):
            a @ b
        _sync(device)
        best = min(best, (time.perf_counter() - started) / rounds)
    return {"dtype": str(dtype).removeprefix("torch."), "size": size, "flops_per_s": 2 * size**3 / best}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def make_batch(args: argparse.Namespace, vocab: int) -> list[Any]:
    from lecritique.trajectory import Trajectory

    rng = np.random.default_rng(0)
    batch = []
    for index in range(args.rows):
        tokens = int(rng.integers(args.response_min, args.response_max + 1))
        batch.append(
            Trajectory(
                f"t{index}",
                "task",
                index // 4,
                rng.integers(1, vocab, args.prompt),
                rng.integers(1, vocab, tokens),
                np.ones(tokens, dtype=bool),
                -rng.uniform(0.5, 3.0, tokens).astype(np.float32),
                np.zeros(tokens, dtype=np.int32),
                float(index % 2),
                0,
                advantages=rng.normal(size=tokens).astype(np.float32),
            )
        )
    return batch


def _timed(action: Callable[[], Any], device: str, steps: int) -> tuple[list[float], Any]:
    """Seconds of each call after a warm-up call, and the last call's result."""
    result = action()
    times = []
    for _ in range(steps):
        _sync(device)
        started = time.perf_counter()
        result = action()
        _sync(device)
        times.append(time.perf_counter() - started)
    return times, result


def _rate(
    name: str, times: list[float], tokens: int, flops_per_token: float, peak: float, **extra: Any
) -> dict[str, Any]:
    seconds = statistics.median(times)
    tokens_per_s = tokens / seconds
    return {
        "stage": name,
        "seconds": seconds,
        "steps_per_s": 1.0 / seconds,
        "tokens_per_s": tokens_per_s,
        "tflop_per_s": tokens_per_s * flops_per_token / 1e12,
        "fraction_of_peak": tokens_per_s * flops_per_token / peak,
        **extra,
    }


def _settings(device: str, sharded: bool, micro_batch_tokens: int) -> dict[str, Any]:
    precision = "bf16" if device == "cuda" else "off"
    base: dict[str, Any] = {
        "micro_batch_tokens": micro_batch_tokens,
        "device": device,
        "mixed_precision": precision,
    }
    if sharded:
        return {**base, "parallelism": "fsdp2", "activation_checkpointing": True}
    return base


def run(
    args: argparse.Namespace, device: str, on_stage: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Every stage in turn; ``on_stage(result so far)`` after each (a run cut short keeps what it measured)."""
    from gpu_check_procs import transport_timing

    from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
    from lecritique.training.critic_trainer import CriticTrainer, CriticTrainerConfig
    from lecritique.training.distributed import free_local_port
    from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig

    peak = matmul_peak(device, args.matmul_size, 3)
    result: dict[str, Any] = {"peak": peak, "stages": []}
    stages: list[dict[str, Any]] = result["stages"]
    print("matmul peak", json.dumps(peak), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        architecture = TinyArchitecture(
            hidden_size=args.hidden,
            num_layers=args.layers,
            num_heads=max(1, args.hidden // 128),
            intermediate_size=4 * args.hidden,
            max_positions=max(512, args.prompt + args.response_max + args.generate_tokens),
        )
        model_dir = write_random_tiny_policy(work / "model", ALPHABET, seed=0, architecture=architecture)
        probe = PolicyTrainer(model_dir, PolicyTrainerConfig(mixed_precision="off", device="cpu"))
        parameters = sum(p.numel() for p in probe.model.parameters())
        batch = make_batch(args, probe.vocab_size)
        del probe
        tokens = sum(t.prompt_ids.shape[0] + t.token_ids.shape[0] for t in batch)
        mean_seq = tokens / len(batch)
        attention = args.layers * args.hidden * mean_seq
        train_flops, forward_flops = 6 * parameters + 6 * attention, 2 * parameters + 2 * attention
        result["model"] = {"parameters": parameters, "hidden": args.hidden, "layers": args.layers}
        result["batch"] = {
            "rows": len(batch),
            "tokens": tokens,
            "micro_batch_tokens": args.micro_batch_tokens,
        }

        def add(stage: dict[str, Any]) -> None:
            stages.append(stage)
            print(stage["stage"], json.dumps(stage, default=str), flush=True)
            if on_stage is not None:
                on_stage(result)

        def trainer_stage(name: str, trainer: PolicyTrainer | CriticTrainer, **extra: Any) -> dict[str, Any]:
            """One trainer's timed steps on the batch, as a stage row (``extra``: more columns)."""
            times, metrics = _timed(partial(trainer.train_step, batch), device, args.steps)
            return _rate(
                name,
                times,
                tokens,
                train_flops,
                peak["flops_per_s"],
                padding_fraction=metrics["padding_fraction"],
                peak_gib=_peak_gib(device),
                **extra,
                layout=trainer.layout_line,
            )

        def policy_stage(name: str, trainer: PolicyTrainer) -> dict[str, Any]:
            return trainer_stage(name, trainer, attention=trainer.engine.attention_line)

        # Packed (the default) and padded micro-batches of the same batch (issue #49): "tokens/s"
        # counts real tokens only, so the two stages' ratio is the useful-token speed-up.
        for packing, name in ((True, "policy trainer, plain"), (False, "policy trainer, plain, padded")):
            plain = PolicyTrainer(
                model_dir,
                PolicyTrainerConfig.model_validate(
                    {**_settings(device, False, args.micro_batch_tokens), "packing": packing}
                ),
            )
            add(policy_stage(name, plain))
            del plain
            _reset_memory(device)
        backend = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(
            backend, init_method=f"tcp://127.0.0.1:{free_local_port()}", rank=0, world_size=1
        )
        try:
            sharded = PolicyTrainer(
                model_dir,
                PolicyTrainerConfig.model_validate(_settings(device, True, args.micro_batch_tokens)),
            )
            add(policy_stage("policy trainer, FSDP2 + checkpointing", sharded))
            del sharded
            _reset_memory(device)
            critic_config = CriticTrainerConfig.model_validate(
                {
                    **_settings(device, True, args.micro_batch_tokens),
                    "predict_batch_tokens": args.predict_batch_tokens,
                }
            )
            critic = CriticTrainer.from_policy(model_dir, critic_config)
            add(trainer_stage("critic trainer, FSDP2 + checkpointing", critic))
            times, _ = _timed(partial(critic.predict, batch), device, args.steps)
            add(_rate("critic predict (forward only)", times, tokens, forward_flops, peak["flops_per_s"]))
            del critic
        finally:
            dist.destroy_process_group()
        _reset_memory(device)
        add(generate_stage(model_dir, args, device, parameters, peak["flops_per_s"]))
        transport = transport_timing(model_dir, work / "transport", device, "gloo")
        add(
            {
                "stage": "weights to a replica, broadcast over gloo",
                "gb_per_s": transport["broadcast_gb_s"],
                "seconds": transport["broadcast_s"],
                "bytes": transport["bytes"],
                "replica_equal": transport["verdict"]["replica_weights_equal"],
            }
        )
        add(
            {
                "stage": "weights through the volume (publish + HF load)",
                "gb_per_s": transport["volume_gb_s"],
                "seconds": transport["publish_s"] + transport["load_hf_s"],
                "bytes": transport["bytes"],
            }
        )
    return result


def generate_stage(
    model_dir: Path, args: argparse.Namespace, device: str, parameters: int, peak: float
) -> dict[str, Any]:
    from lecritique.engines import HFEngineConfig, SamplingParams
    from lecritique.engines.hf import HFEngine

    dtype = "bfloat16" if device == "cuda" else "float32"
    engine = HFEngine(
        HFEngineConfig(
            model_path=str(model_dir), device=device, dtype=dtype, max_batch_size=args.generate_rows
        )
    )
    prompts = [
        [1 + (i + j) % 8 for j in range(args.prompt)] for i in range(args.generate_rows)
    ]  # ids < the alphabet
    sampling = SamplingParams(max_tokens=args.generate_tokens, ignore_eos=True, seed=0)
    times, completions = _timed(lambda: engine.generate(prompts, 1, sampling), device, 1)
    sampled = sum(len(c[0].token_ids) for c in completions)
    engine.close()
    return _rate(
        f"HF rollout engine, {args.generate_rows} x {args.generate_tokens} sampled tokens, {dtype}",
        times,
        sampled,
        2 * parameters,
        peak,
    )


def _peak_gib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None


def _reset_memory(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def environment(device: str) -> dict[str, Any]:
    cuda = device == "cuda"
    return {
        "torch": torch.__version__,
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON path (CUDA default: docs/bench-gpu.json)"
    )
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--response-min", type=int, default=512)
    parser.add_argument("--response-max", type=int, default=1024)
    parser.add_argument("--micro-batch-tokens", type=int, default=16384)
    parser.add_argument("--predict-batch-tokens", type=int, default=65536)
    parser.add_argument("--generate-rows", type=int, default=64)
    parser.add_argument("--generate-tokens", type=int, default=256)
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per stage after one warm-up")
    args = parser.parse_args(argv)
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device
    device = "cpu" if device == "auto" else device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device")
    out = args.out or (
        DOCS_JSON if device == "cuda" else Path(tempfile.gettempdir()) / "lecritique-bench-gpu-cpu.json"
    )
    if device != "cuda" and out.resolve().is_relative_to((REPO_ROOT / "docs").resolve()):
        parser.error(f"--out {out}: a CPU run never writes under docs/ (its figures are no GPU's)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    measured_on = environment(device)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write_partial(partial: dict[str, Any]) -> None:
        # A run stopped by gpu_all.sh's time limit still leaves every stage it finished.
        out.write_text(
            json.dumps({"environment": measured_on, **partial, "partial": True}, indent=1, default=str) + "\n"
        )

    result = {"environment": measured_on, **run(args, device, write_partial)}
    result["wall_s"] = time.perf_counter() - started
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"wrote {out}", flush=True)
    return out


if __name__ == "__main__":
    main()
