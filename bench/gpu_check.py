"""The GPU checks of the scale work, as one script (run on a machine with a GPU; CPU works for a dry run).

    python bench/gpu_check.py OUT_DIR [--hidden 1024 --layers 20]

1. FSDP2 over NCCL with world size 1, bf16 mixed precision (``auto`` on a bf16 GPU) and
   activation checkpointing, against an unsharded float32 trainer on the same batches: losses,
   gradient norms, peak memory; a DCP checkpoint of the sharded state restored into a fresh
   unsharded trainer; the HF directory published from the shards loaded with from_pretrained.
2. Whether NCCL accepts two ranks on one GPU (a two-process all-reduce).
3. The broadcast weight transport from a trainer process to a replica process (NCCL if two
   ranks on one GPU work, else gloo), and publish + load through the weight store, for a model of
   a few hundred million parameters: seconds and GB/s.

Writes OUT_DIR/gpu_check.json and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

ALPHABET = "1234.\nrc="


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _model(directory: Path, hidden: int, layers: int) -> Path:
    from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy

    architecture = TinyArchitecture(hidden_size=hidden, num_layers=layers, num_heads=hidden // 64, intermediate_size=4 * hidden)
    return write_random_tiny_policy(directory, ALPHABET, seed=0, architecture=architecture)


def _batches(count: int, vocab: int) -> list[Any]:
    import numpy as np

    from lecritique.trajectory import Trajectory

    rng = np.random.default_rng(0)
    batches = []
    for _ in range(count):
        batch = []
        for index in range(16):
            tokens = int(rng.integers(96, 192))
            batch.append(Trajectory(
                f"t{index}", "task", index // 4, rng.integers(1, vocab, 64), rng.integers(1, vocab, tokens),
                np.ones(tokens, dtype=bool), -rng.uniform(0.5, 3.0, tokens).astype(np.float32),
                np.zeros(tokens, dtype=np.int32), 0.0, 0, advantages=rng.normal(size=tokens).astype(np.float32),
            ))
        batches.append(batch)
    return batches


def fsdp_check(model_dir: Path, work: Path) -> dict[str, Any]:
    """World size 1 over NCCL (gloo without CUDA): FSDP2 + bf16 + activation checkpointing vs float32 unsharded."""
    from transformers import AutoModelForCausalLM

    from lecritique.training.checkpoint import TrainerCheckpoints
    from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
    from lecritique.weights import WeightStore

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_port()}", rank=0, world_size=1)
    config = {"optimizer": {"lr": 1e-5}, "micro_batch_tokens": 4096}
    batches = _batches(3, vocab=10)
    result: dict[str, Any] = {"backend": backend}
    runs = {}
    for label, settings in (("float32 unsharded", {"mixed_precision": "off"}),
                            ("fsdp2 bf16 + activation checkpointing", {"parallelism": "fsdp2", "activation_checkpointing": True})):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        trainer = PolicyTrainer(model_dir, PolicyTrainerConfig.model_validate({**config, **settings}))
        started = time.perf_counter()
        metrics = [trainer.train_step(batch) for batch in batches]
        runs[label] = trainer
        result[label] = {
            "sharded": trainer.engine.sharded, "compute_dtype": str(trainer.engine.compute_dtype),
            "loss": [m["loss"] for m in metrics], "grad_norm": [m["grad_norm"] for m in metrics],
            "seconds": time.perf_counter() - started,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
        }
    sharded = runs["fsdp2 bf16 + activation checkpointing"]
    checkpoints = TrainerCheckpoints(work / "ckpt")
    checkpoints.save(sharded)
    restored = PolicyTrainer(model_dir, PolicyTrainerConfig.model_validate({**config, "mixed_precision": "off"}))
    checkpoints.load(restored, checkpoints.path(sharded.steps))
    version = sharded.publish(WeightStore(work / "store"))
    published = AutoModelForCausalLM.from_pretrained(str(WeightStore(work / "store").path("policy", version or 0)))
    gathered = {name: tensor.full_tensor().cpu() for name, tensor in sharded.model.state_dict().items()}
    result["checkpoint_restored_equal"] = all(
        torch.equal(parameter.detach().cpu(), gathered[name]) for name, parameter in restored.model.named_parameters()
    )
    result["published_equal"] = all(torch.equal(tensor, gathered[name]) for name, tensor in published.state_dict().items())
    result["restored_optimizer_states"] = len(restored.engine.optimizer.state)
    dist.destroy_process_group()
    return result


def _two_ranks_worker(rank: int, port: int, out: str) -> None:
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    value = torch.ones(1, device="cuda") * (rank + 1)
    dist.all_reduce(value)
    Path(out).write_text(str(float(value.item())))
    dist.destroy_process_group()


def nccl_two_ranks_one_gpu(work: Path) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA"}
    port = _port()
    outs = [work / f"rank{rank}.txt" for rank in range(2)]
    code = "import sys; sys.path[:0] = sys.argv[4:]; from gpu_check import _two_ranks_worker as w; w(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])"
    processes = [subprocess.Popen([sys.executable, "-c", code, str(rank), str(port), str(outs[rank]), str(Path(__file__).parent), *sys.path],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    logs = []
    for process in processes:
        try:
            logs.append(process.communicate(timeout=60)[0][-1500:])
        except subprocess.TimeoutExpired:
            process.kill()
            logs.append("timed out")
    ok = all(out.exists() and out.read_text() == "3.0" for out in outs)
    return {"works": ok, "log_tail": "" if ok else logs}


def _receiver(root: str, model_dir: str, marks: str, device: str) -> None:
    import threading

    from transformers import AutoModelForCausalLM

    from lecritique.weights.broadcast import BroadcastReceiver, model_tensors

    if device.startswith("cuda"):
        torch.cuda.set_device(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(device)
    lock = threading.Lock()

    def applied(version: int) -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        with open(marks, "a") as handle:
            handle.write(f"{version} {time.time()}\n")

    BroadcastReceiver(Path(root) / "policy", lambda: dict(model_tensors(model)), lambda: lock, applied).start()._thread.join(600)


def transport_timing(model_dir: Path, work: Path, backend: str) -> dict[str, Any]:
    """Trainer publish -> replica has every tensor: broadcast, and weight store write + HF load."""
    from lecritique.engines import HFEngine, HFEngineConfig
    from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
    from lecritique.training.weight_sync import WeightSync
    from lecritique.weights import WeightStore
    from lecritique.weights.config import BroadcastTransport

    device = "cuda" if torch.cuda.is_available() else "cpu"
    trainer = PolicyTrainer(model_dir, PolicyTrainerConfig(mixed_precision="off"))
    size = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
    store = WeightStore(work / "volume")
    started = time.perf_counter()
    version = trainer.publish(store)
    publish_s = time.perf_counter() - started
    engine = HFEngine(HFEngineConfig(model_path=str(model_dir), device=device))
    started = time.perf_counter()
    engine.load_weights(1, str(store.path("policy", version or 0)))
    if device == "cuda":
        torch.cuda.synchronize()
    load_s = time.perf_counter() - started
    del engine
    marks = work / "applied.txt"
    root = work / "broadcast"
    code = "import sys; sys.path[:0] = sys.argv[5:]; from gpu_check import _receiver as r; r(*sys.argv[1:5])"
    replica = subprocess.Popen([sys.executable, "-c", code, str(root), str(model_dir), str(marks), device, str(Path(__file__).parent), *sys.path])
    try:
        sync = WeightSync(trainer, WeightStore(root), "policy",
                          BroadcastTransport(port=0, backend=backend, persist_every=1000, join_timeout_seconds=180), receivers=1)
        sync.publish()
        with torch.no_grad():
            for parameter in trainer.model.parameters():
                parameter.add_(1e-3)
        started = time.time()
        sent = sync.publish()
        while not marks.exists() or str(sent) not in [line.split()[0] for line in marks.read_text().splitlines()]:
            time.sleep(0.002)
        applied = dict(line.split() for line in marks.read_text().splitlines())
        broadcast_s = float(applied[str(sent)]) - started
        sync.close()
    finally:
        replica.wait(timeout=120)
    return {
        "backend": backend, "device": device, "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "bytes": size, "publish_s": publish_s, "load_hf_s": load_s, "broadcast_s": broadcast_s,
        "volume_gb_s": size / (publish_s + load_s) / 1e9, "broadcast_gb_s": size / broadcast_s / 1e9,
    }


def _step(results: dict[str, Any], name: str, action: Any) -> None:
    started = time.perf_counter()
    try:
        results[name] = action()
    except Exception:
        results[name] = {"error": traceback.format_exc()[-3000:]}
    results[name + "_wall_s"] = time.perf_counter() - started
    print(name, json.dumps(results[name], default=str)[:2000], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=20)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "torch": torch.__version__, "cuda": torch.cuda.is_available(),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
        "date": time.strftime("%Y-%m-%d"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = _model(work / "model", args.hidden, args.layers)
        _step(results, "fsdp2", lambda: fsdp_check(model_dir, work / "fsdp"))
        _step(results, "nccl_two_ranks_one_gpu", lambda: nccl_two_ranks_one_gpu(work))
        works = isinstance(results["nccl_two_ranks_one_gpu"], dict) and results["nccl_two_ranks_one_gpu"].get("works")
        if works:
            _step(results, "transport_nccl", lambda: transport_timing(model_dir, work / "nccl", "nccl"))
        _step(results, "transport_gloo", lambda: transport_timing(model_dir, work / "gloo", "gloo"))
    (args.out / "gpu_check.json").write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
