"""Run by test_weight_broadcast in real processes: a trainer publishing by broadcast, or a replica receiving.

python broadcast_worker.py publish ROOT MODEL_DIR RECEIVERS STEPS CONFIG_JSON OUT_DIR   (python or torchrun)
python broadcast_worker.py receive ROOT MODEL_DIR OUT_DIR
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM

from lecritique.training.distributed import init_distributed_from_env
from lecritique.training.policy_trainer import PolicyTrainer, PolicyTrainerConfig
from lecritique.training.weight_sync import WeightSync, publish_dtype
from lecritique.weights import WeightStore
from lecritique.weights.broadcast import BroadcastReceiver, model_tensors
from lecritique.weights.config import BroadcastTransport
from tests.unit.training.training_helpers import make_trajectory


def publish(root: Path, model_dir: str, receivers: int, steps: int, config_json: str, out: Path) -> None:
    context = init_distributed_from_env()
    settings = json.loads(config_json)
    trainer = PolicyTrainer(model_dir, PolicyTrainerConfig.model_validate(settings["trainer"]))
    if settings.get("freeze_embeddings"):
        trainer.model.get_input_embeddings().weight.requires_grad_(False)
    transport = BroadcastTransport(
        port=0,
        persist_every=settings.get("persist_every", 100),
        join_timeout_seconds=settings.get("join_timeout", 120),
    )
    dtype = publish_dtype(settings.get("publish_dtype", "trained"))
    sync = WeightSync(trainer, WeightStore(root), "policy", transport, receivers, dtype=dtype)
    rng = np.random.default_rng(0)
    versions = []
    for _ in range(steps):
        batch = [
            make_trajectory(rng, i, prompt_len=3, num_tokens=6, advantage=float(rng.normal()))
            for i in range(4)
        ]
        trainer.train_step(batch)
        versions.append(sync.publish())
    trainer.save(out / "trainer")  # a collective under FSDP2
    sync.close()
    if context.is_main:
        (out / "publisher.json").write_text(json.dumps({"versions": versions}))
    del trainer
    if context.enabled:
        dist.barrier()
        dist.destroy_process_group()


def receive(root: Path, model_dir: str, out: Path, dtype: str = "float32") -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    lock = threading.Lock()
    versions: list[int] = []
    receiver = BroadcastReceiver(
        WeightStore(root).role_dir("policy"),
        lambda: dict(model_tensors(model)),
        lambda: lock,
        versions.append,
    ).start()
    receiver._thread.join(timeout=300)
    model.save_pretrained(out)
    (out / "receiver.json").write_text(
        json.dumps({"versions": versions, "tensors_received": receiver.tensors_received})
    )


if __name__ == "__main__":
    torch.set_num_threads(1)
    mode, root, model_dir = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if mode == "publish":
        publish(root, model_dir, int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], Path(sys.argv[7]))
    else:
        receive(root, model_dir, Path(sys.argv[4]), *sys.argv[5:6])
