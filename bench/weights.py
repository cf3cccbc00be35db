"""Weight publish and load time against model size, and what that means for 4B and 32B policies.

    python bench/weights.py [--sizes tiny,25m,110m,340m] [--skip-vllm] [--json out.json]

For each size (randomly initialised Llamas, float32, character tokenizer) it measures:

* ``publish``: the policy trainer writing a version to the weight store (``save_pretrained``,
  fsync, atomic rename), what the shared-volume transport does every step;
* ``load HF``: the HF rollout engine loading that version (``from_pretrained`` into a new model);
* ``reload vLLM``: the vLLM engine's in-place reload from the directory (CPU build here);
* ``load evaluator``: the value evaluator loading a critic version of the same size;
* ``broadcast``: the broadcast transport, from the trainer's ``publish`` call until a replica in
  another process has every tensor copied into its model (gloo over loopback, all tensors changed).

The "shared volume" here is the local disk with its page cache, so publish + load is the best a
shared volume could do; the paper extrapolation (printed last, and in docs/training.md) states the
bandwidths of a real cluster instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs")]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy  # noqa: E402

ALPHABET = "1234.\nrc="
SIZES: dict[str, TinyArchitecture] = {
    "tiny": TinyArchitecture(),
    "25m": TinyArchitecture(hidden_size=512, num_layers=8, num_heads=8, intermediate_size=1536),
    "110m": TinyArchitecture(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
    "340m": TinyArchitecture(hidden_size=1024, num_layers=20, num_heads=16, intermediate_size=4096),
}


def _timed(action: Callable[[], Any], repeats: int) -> float:
    """Median seconds of ``repeats`` runs of ``action``."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def _parameters(directory: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(directory / "model.safetensors"), "pt") as handle:
        return sum(_count(handle.get_slice(name).get_shape()) for name in handle.keys())  # noqa: SIM118


def _count(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _publish(v0: Path, store_root: Path, repeats: int) -> float:
    from lecritique.training.policy_trainer import PolicyTrainer
    from lecritique.weights import WeightStore

    trainer = PolicyTrainer(v0)
    store = WeightStore(store_root)
    return _timed(lambda: trainer.publish(store, keep_last=2), repeats)


def _load_hf(v0: Path, v1: Path, repeats: int) -> float:
    from lecritique.engines import HFEngineConfig
    from lecritique.engines.hf import HFEngine

    engine = HFEngine(HFEngineConfig(model_path=str(v0)))
    return _timed(lambda: engine.load_weights(1, str(v1)), repeats)


def _evaluator_load(v1: Path, work: Path, repeats: int) -> float:
    from lecritique.critics.discriminative import DiscriminativeCritic
    from lecritique.critics.specs import DiscriminativeCriticSpec
    from lecritique.models.critic import critic_from_policy

    critic_dir = work / "critic"
    critic_from_policy(v1).save_pretrained(critic_dir)
    spec = DiscriminativeCriticSpec()
    seconds = _timed(lambda: DiscriminativeCritic(critic_dir, spec), repeats)
    gc.collect()
    return seconds


def _vllm_reload(v0: Path, v1: Path, repeats: int) -> tuple[float, float]:
    from lecritique.engines import VLLMEngineConfig
    from lecritique.engines.vllm import VLLMEngine

    start = time.perf_counter()
    engine = VLLMEngine(VLLMEngineConfig(model_path=str(v0), max_model_len=256))
    started = time.perf_counter() - start
    try:
        reload = _timed(lambda: engine.load_weights(1, str(v1)), repeats)
    finally:
        engine.close()
    return started, reload


def _broadcast(v0: Path, work: Path) -> float:
    """Seconds from the trainer's publish until the replica process applied every tensor."""
    import torch

    from lecritique.training.policy_trainer import PolicyTrainer
    from lecritique.training.weight_sync import WeightSync
    from lecritique.weights import WeightStore
    from lecritique.weights.config import BroadcastTransport

    root = work / "broadcast"
    marks = work / "applied.jsonl"
    replica = subprocess.Popen([sys.executable, __file__, "--receiver", str(root), str(v0), str(marks)])
    try:
        trainer = PolicyTrainer(v0)
        sync = WeightSync(
            trainer, WeightStore(root), "policy", BroadcastTransport(port=0, persist_every=1000), receivers=1
        )
        sync.publish()  # version 0: forms the group (and is written to the store, as every first publish)
        with torch.no_grad():
            for parameter in trainer.model.parameters():
                parameter.add_(1e-3)  # every tensor changed, as after an optimiser step
        start = time.time()
        version = sync.publish()
        while not marks.exists() or str(version) not in [
            line.split()[0] for line in marks.read_text().splitlines()
        ]:
            time.sleep(0.005)
        applied = {int(a): float(b) for a, b in (line.split() for line in marks.read_text().splitlines())}
        sync.close()
        return applied[int(version or 0)] - start
    finally:
        replica.wait(timeout=120)


def _receiver(root: str, model_dir: str, marks: str) -> None:
    """The replica process of ``_broadcast``: an HF model receiving in place; logs 'version time' lines."""
    import threading

    from transformers import AutoModelForCausalLM

    from lecritique.weights.broadcast import BroadcastReceiver, model_tensors

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    lock = threading.Lock()

    def applied(version: int) -> None:
        with open(marks, "a") as handle:
            handle.write(f"{version} {time.time()}\n")

    receiver = BroadcastReceiver(
        Path(root) / "policy", lambda: dict(model_tensors(model)), lambda: lock, applied
    ).start()
    receiver._thread.join(timeout=600)


def measure(size: str, repeats: int, vllm: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-weights-") as tmp:
        work = Path(tmp)
        v0 = write_random_tiny_policy(work / "v0", ALPHABET, seed=0, architecture=SIZES[size])
        v1 = write_random_tiny_policy(work / "v1", ALPHABET, seed=1, architecture=SIZES[size])
        row: dict[str, Any] = {
            "size": size,
            "parameters": _parameters(v0),
            "bytes": (v0 / "model.safetensors").stat().st_size,
        }
        row["publish_s"] = _publish(v0, work / "store", repeats)
        gc.collect()
        row["load_hf_s"] = _load_hf(v0, v1, repeats)
        gc.collect()
        row["load_evaluator_s"] = _evaluator_load(v1, work, repeats)
        row["broadcast_s"] = _broadcast(v0, work)
        if vllm:
            row["vllm_start_s"], row["reload_vllm_s"] = _vllm_reload(v0, v1, repeats)
    return row


# Paper extrapolation: a bf16 policy of N parameters, R rollout replicas.
PAPER_MODELS = {"4B": 4e9, "32B": 32e9}


def extrapolate(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds per version for each transport, from the stated bandwidths (bytes / bandwidth)."""
    rows = []
    for name, parameters in PAPER_MODELS.items():
        size = parameters * 2  # bf16
        volume_read = max(
            size / (args.volume_read_gbs * 1e9), args.replicas * size / (args.volume_aggregate_gbs * 1e9)
        )
        rows.append(
            {
                "model": name,
                "gigabytes": size / 1e9,
                "volume_s": size / (args.volume_write_gbs * 1e9) + volume_read,
                "gloo_s": size / (args.gloo_gbs * 1e9),
                "nccl_s": size / (args.nccl_gbs * 1e9),
            }
        )
    return rows


def _measured_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        title="weights: publish and load seconds by model size (float32, this machine's disk as the volume)"
    )
    columns = (
        "size",
        "parameters",
        "MB",
        "publish",
        "load HF",
        "reload vLLM",
        "load evaluator",
        "volume total (HF)",
        "broadcast",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        vllm = f"{row['reload_vllm_s']:.2f}" if "reload_vllm_s" in row else "-"
        table.add_row(
            row["size"],
            f"{row['parameters'] / 1e6:,.1f}M",
            f"{row['bytes'] / 1e6:,.0f}",
            f"{row['publish_s']:.2f}",
            f"{row['load_hf_s']:.2f}",
            vllm,
            f"{row['load_evaluator_s']:.2f}",
            f"{row['publish_s'] + row['load_hf_s']:.2f}",
            f"{row['broadcast_s']:.2f}",
        )
    return table


def _paper_table(args: argparse.Namespace) -> Table:
    table = Table(
        title=(
            f"on paper, bf16, {args.replicas} rollout replicas: volume {args.volume_write_gbs} GB/s write, "
            f"{args.volume_read_gbs} GB/s read per client, {args.volume_aggregate_gbs} GB/s aggregate; "
            f"gloo {args.gloo_gbs} GB/s; NCCL {args.nccl_gbs} GB/s"
        )
    )
    for column in ("model", "GB", "shared volume (s)", "broadcast gloo (s)", "broadcast NCCL (s)"):
        table.add_column(column, justify="right")
    for row in extrapolate(args):
        table.add_row(
            row["model"],
            f"{row['gigabytes']:.0f}",
            f"{row['volume_s']:.1f}",
            f"{row['gloo_s']:.1f}",
            f"{row['nccl_s']:.2f}",
        )
    return table


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--receiver":
        _receiver(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {sorted(SIZES)}")
    parser.add_argument("--repeats", type=int, default=2, help="runs per measurement (median reported)")
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument(
        "--replicas", type=int, default=8, help="rollout replicas reading each version (paper)"
    )
    parser.add_argument(
        "--volume-write-gbs", type=float, default=1.0, help="shared volume write GB/s per client (paper)"
    )
    parser.add_argument(
        "--volume-read-gbs", type=float, default=2.0, help="shared volume read GB/s per client (paper)"
    )
    parser.add_argument(
        "--volume-aggregate-gbs", type=float, default=10.0, help="shared volume read GB/s over all clients"
    )
    parser.add_argument("--gloo-gbs", type=float, default=2.5, help="gloo broadcast GB/s (25 Gb/s Ethernet)")
    parser.add_argument(
        "--nccl-gbs", type=float, default=40.0, help="NCCL broadcast bus GB/s (400 Gb/s InfiniBand)"
    )
    args = parser.parse_args()
    console = Console(width=160)
    rows = []
    for size in args.sizes.split(","):
        with console.status(f"measuring {size}"):
            rows.append(measure(size, args.repeats, vllm=not args.skip_vllm))
        console.print(json.dumps(rows[-1]))
    console.print(_measured_table(rows))
    console.print(_paper_table(args))
    if args.json:
        args.json.write_text(json.dumps({"measured": rows, "paper": extrapolate(args)}, indent=1))


if __name__ == "__main__":
    main()
