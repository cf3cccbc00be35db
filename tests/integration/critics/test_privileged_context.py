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
is decided: the PVF must reach its layout's floor (``FLOOR``: a margin below what every
measured seed reached), the VF stay below 0.1. In the group layouts the context is the
siblings' responses with their rewards, which reveal the hidden string whenever a sibling was
right (groups of 8: all 7 siblings wrong in 1 group of 128).

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


FLOOR = {"reference": 0.7, "reference_loo_group": 0.5, "loo_group": 0.1}
"""Held-out EV after the answer each layout must reach: a stated margin below the lowest value measured
over seeds of this case (split, head and epoch order; ``bench/context_probe.py``, docs/critics.md
"Does a privileged critic read its context?"): ``reference`` chat 0.782-1.000 over 10 seeds (plain
0.990-1.000 over 3), ``reference_loo_group`` chat 0.655-0.976 over 3, ``loo_group`` plain
0.193-0.577 over 3. The test's own seed 0 measured 0.911 / 0.990, 0.976 and 0.409. Each floor stays
far above the ordinary critic's ceiling here (it cannot beat the mean: -0.075..0.008 over 6 cases),
so a critic that ignored its context still fails. ``loo_group`` falls short of 0.9 at this size; the
measurements of why are in the doc."""
VF_CEILING = 0.1
"""The ordinary critic cannot predict the return: held-out EV after the answer stays below this
(measured -0.075..0.008); a negative EV (worse than the mean, mild over-fitting) is allowed down to
-0.25."""


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
    assert abs(before) < 0.1 and -0.25 < after < VF_CEILING, (template_kind, before, after, train)
