"""A privileged critic provably reads its context (issue 39 §1).

The task (``hidden_digits``): a fixed, uninformative prompt; a hidden three-digit string that only
the critic sees (its privileged context); the return is 1 when the response is that string. Half
the responses are right and half are other strings, so nothing the policy sees says anything about
the return: the ordinary value function (VF) cannot beat the mean (EV ~ 0), while a privileged
value function (PVF) that reads its context can predict the return once the response is written.

For every critic input layout the project ships (``reference``, ``loo_group``,
``reference_loo_group``; plain and chat templates) a tiny critic is pretrained offline with the
pretraining tool's own epoch loop (:mod:`lecritique.pretrain.train`) and measured on held-out
tasks (hidden strings it never saw in training) at the state after the answer, where the return
is decided: the PVF must reach EV 0.9, the VF stay within 0.1 of 0. In the group layouts the
context is the siblings' responses with their rewards, which reveal the hidden string whenever a
sibling was right (groups of 8: all 7 siblings wrong in 1 group of 128).

What made it fail first: 2-digit strings (100 in all, 72 seen in training) let the critic memorise
(string, response) pairs, train EV 0.93 and held-out 0.05; with 1,000 strings it has to learn to
compare, and does (``docs/critics.md``, "Does a privileged critic read its context?").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from lecritique.critics.specs import DiscriminativeCriticSpec
from lecritique.envs import get_environment
from lecritique.models.policy import load_tokenizer
from lecritique.models.templates import build_template
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
from lecritique.pretrain.probe import CHAT_TEMPLATE, DIGITS_ALPHABET, half_right, offline_episodes, state_evs
from lecritique.pretrain.train import Schedule, split_by_task, train_epoch
from lecritique.training.critic_trainer import CriticTrainer

pytestmark = [pytest.mark.slow(seconds=120), pytest.mark.timeout(1800)]

GROUP_SIZE = 8
TASKS = 400
EPOCHS = 10
LOO_GROUP_FLOOR = 0.2


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One torch thread: a tiny model gains nothing from two, and on a loaded 2-core machine two
    spinning OpenMP threads used over 4 CPU-minutes per layout where a one-thread run of 900
    updates took 89 s of wall time."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained two-layer tiny Llama over digits, the layouts' punctuation and role names."""
    architecture = TinyArchitecture(
        hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, max_positions=512
    )
    return Path(
        write_random_tiny_policy(
            tmp_path_factory.mktemp("digits") / "model",
            DIGITS_ALPHABET,
            seed=5,
            architecture=architecture,
        )
    )


def held_out_evs(model: Path, context: str, template_kind: str) -> tuple[float, float, float]:
    """(held-out EV before the response, held-out EV after it, train EV after it)."""
    tokenizer = load_tokenizer(model)
    if template_kind == "chat":
        tokenizer.chat_template = CHAT_TEMPLATE
    critic = DiscriminativeCriticSpec(context=context, optimizer={"lr": 1e-3})
    environment = get_environment("hidden_digits", digits=[3, 3])
    episodes = offline_episodes(
        environment,
        environment.sample_tasks(TASKS, "train", seed=0),
        GROUP_SIZE,
        half_right(1),
        build_template(template_kind, tokenizer),
        tokenizer,
        critic,
    )
    assert 0.4 < np.mean([t.reward for t in episodes]) < 0.6
    train, held_out = split_by_task(episodes, 0.25, seed=0)
    torch.manual_seed(0)
    trainer = CriticTrainer.from_policy(model, critic)
    schedule = Schedule(
        batch_size=32, max_epochs=EPOCHS, patience=EPOCHS, min_delta=0.0, lambda_target=1.0, seed=0
    )
    for epoch in range(1, EPOCHS + 1):
        train_epoch(trainer, train, schedule, epoch, lambda: None)
    held = state_evs(trainer.predict(held_out), held_out, [0, -1])
    return held[0], held[-1], state_evs(trainer.predict(train), train, [-1])[-1]


FLOOR = {"reference": 0.9, "reference_loo_group": 0.9, "loo_group": LOO_GROUP_FLOOR}
"""Held-out EV after the answer each layout must reach. ``loo_group`` falls short of 0.9: the
tiny critic must find a sibling paid 1.00 and compare its digits with the response's, and at
this budget it learns only part of that (measured: see ``docs/critics.md``)."""


@pytest.mark.parametrize("template_kind", ["plain", "chat"])
@pytest.mark.parametrize("context", ["reference", "loo_group", "reference_loo_group"])
def test_a_privileged_critic_predicts_the_return_from_its_context(
    digits_model: Path, context: str, template_kind: str
) -> None:
    before, after, train = held_out_evs(digits_model, context, template_kind)
    # Before the response nothing decides the return; after it the context does.
    assert abs(before) < 0.1, (context, template_kind, before)
    assert after >= FLOOR[context], (context, template_kind, after, train)


@pytest.mark.parametrize("template_kind", ["plain", "chat"])
def test_the_ordinary_critic_cannot_predict_it(digits_model: Path, template_kind: str) -> None:
    before, after, train = held_out_evs(digits_model, "none", template_kind)
    assert abs(before) < 0.1 and abs(after) < 0.1, (template_kind, before, after, train)
