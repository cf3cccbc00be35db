"""Does a privileged critic read its context, and how fast? The ``hidden_digits`` probe of
``tests/integration/critics/test_privileged_context.py`` with its knobs exposed (issue 45 item 4).

One line of JSON per evaluation: the held-out EV at the state after the answer (where the context
decides the return), before the response (where nothing does), the train EV after the answer, the
updates made and the seconds spent. The defaults are the test's (two-layer hidden-64 critic, lr
1e-3, batch 32, 400 tasks in groups of 8, a quarter held out, 10 epochs = 750 updates).

    python bench/context_probe.py --context loo_group --epochs 40 --eval-every 5
    python bench/context_probe.py --context reference --template chat --seed 3   # one repeat of the test's case
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from lecritique.critics.specs import DiscriminativeCriticSpec
from lecritique.envs import get_environment
from lecritique.models.policy import load_tokenizer
from lecritique.models.templates import build_template
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
from lecritique.pretrain.probe import CHAT_TEMPLATE, DIGITS_ALPHABET, half_right, offline_episodes, state_evs
from lecritique.pretrain.train import Schedule, split_by_task, train_epoch
from lecritique.training.critic_trainer import CriticTrainer


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--context", default="loo_group")
    parser.add_argument("--template", default="plain", choices=["plain", "chat"])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=10, help="epochs between evaluations")
    parser.add_argument("--seed", type=int, default=0, help="head, split and epoch order (the test: 0)")
    parser.add_argument(
        "--model-seed", type=int, default=5, help="the critic's random backbone (the test: 5)"
    )
    parser.add_argument("--episode-seed", type=int, default=1, help="the responses (the test: 1)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="append the JSON lines here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    architecture = TinyArchitecture(
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=args.heads,
        intermediate_size=2 * args.hidden,
        max_positions=512,
    )
    with tempfile.TemporaryDirectory() as folder:
        model = Path(
            write_random_tiny_policy(Path(folder) / "model", DIGITS_ALPHABET, args.model_seed, architecture)
        )
        tokenizer = load_tokenizer(model)
        if args.template == "chat":
            tokenizer.chat_template = CHAT_TEMPLATE
        critic = DiscriminativeCriticSpec(context=args.context, optimizer={"lr": args.lr})
        environment = get_environment("hidden_digits", digits=[3, 3])
        episodes = offline_episodes(
            environment,
            environment.sample_tasks(args.tasks, "train", seed=0),
            8,
            half_right(args.episode_seed),
            build_template(args.template, tokenizer),
            tokenizer,
            critic,
        )
        train, held_out = split_by_task(episodes, 0.25, seed=args.seed)
        torch.manual_seed(args.seed)
        trainer = CriticTrainer.from_policy(model, critic)
        schedule = Schedule(args.batch, args.epochs, args.epochs, 0.0, 1.0, args.seed)
        started = time.perf_counter()
        for epoch in range(1, args.epochs + 1):
            train_epoch(trainer, train, schedule, epoch, lambda: None)
            if epoch % args.eval_every and epoch != args.epochs:
                continue
            held = state_evs(trainer.predict(held_out), held_out, [0, -1])
            row = {
                **{k: v for k, v in vars(args).items() if k != "out"},
                "epoch": epoch,
                "updates": trainer.steps,
                "held_out_ev_after": held[-1],
                "held_out_ev_before": held[0],
                "train_ev_after": state_evs(trainer.predict(train), train, [-1])[-1],
                "seconds": time.perf_counter() - started,
            }
            line = json.dumps(row)
            print(line, flush=True)
            if args.out is not None:
                with args.out.open("a") as file:
                    file.write(line + "\n")
    print(f"mean return {np.mean([t.reward for t in episodes]):.3f}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
