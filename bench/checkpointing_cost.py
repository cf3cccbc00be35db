"""Activation checkpointing's cost on the CPU (issue #38), side by side in one process.

    python bench/checkpointing_cost.py [--rounds 2] [--steps 4]

The policy and the critic trainer, each under FSDP2 (world size 1, gloo, float32, one thread) with
and without activation checkpointing, on the same tiny Llama (hidden 128, 4 layers) and the same
8-row batch (16 prompt + 48-112 response tokens); per configuration the median step seconds of
``--steps`` steps after a warm-up, the configurations interleaved ``--rounds`` times so that load
from other processes hits every configuration alike. Prints each median and the ratios
checkpointed / plain per trainer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "libs"), str(REPO_ROOT / "bench")]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from gpu_perf import ALPHABET, make_batch  # noqa: E402

from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy  # noqa: E402
from lecritique.training.critic_trainer import CriticTrainer, CriticTrainerConfig  # noqa: E402
from lecritique.training.distributed import free_local_port  # noqa: E402
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    shape = argparse.Namespace(rows=8, prompt=16, response_min=48, response_max=112)
    architecture = TinyArchitecture(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512)
    model_dir = write_random_tiny_policy(Path(tempfile.mkdtemp()) / "model", ALPHABET, 0, architecture)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_local_port()}", rank=0, world_size=1)
    seconds: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for checkpointing in (False, True):
            settings = {
                "micro_batch_tokens": 512,
                "mixed_precision": "off",
                "parallelism": "fsdp2",
                "activation_checkpointing": checkpointing,
            }
            suffix = "checkpointed" if checkpointing else "plain"
            policy = PolicyTrainer(model_dir, PolicyTrainerConfig.model_validate(settings))
            batch = make_batch(shape, policy.vocab_size)
            seconds.setdefault(f"policy {suffix}", []).append(
                _median_step(policy.train_step, batch, args.steps)
            )
            torch.manual_seed(0)
            critic = CriticTrainer.from_policy(model_dir, CriticTrainerConfig.model_validate(settings))
            seconds.setdefault(f"critic {suffix}", []).append(
                _median_step(critic.train_step, batch, args.steps)
            )
    dist.destroy_process_group()
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, value in medians.items():
        print(f"{name}: {value:.3f} s/step (rounds: {', '.join(f'{v:.3f}' for v in seconds[name])})")
    for role in ("policy", "critic"):
        print(
            f"{role} checkpointed / plain: {medians[f'{role} checkpointed'] / medians[f'{role} plain']:.2f}"
        )
    print(
        f"policy / critic, checkpointed: {medians['policy checkpointed'] / medians['critic checkpointed']:.2f}"
    )


def _median_step(step: object, batch: list[object], steps: int) -> float:
    assert callable(step)
    step(batch)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        step(batch)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


if __name__ == "__main__":
    main()
