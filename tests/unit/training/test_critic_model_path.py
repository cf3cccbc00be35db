"""A discriminative critic can start from a saved critic (Le Critique §7.1), not only from the policy."""

from __future__ import annotations

import numpy as np

from lecritique.critics.kinds import KINDS
from lecritique.critics.specs import DiscriminativeCriticSpec
from tests.unit.training.training_helpers import make_trajectory


def test_a_critic_starts_from_its_model_path(tiny_llama_dir, tmp_path):
    rng = np.random.default_rng(0)
    batch = [make_trajectory(rng, i, prompt_len=3, num_tokens=5, advantage=0.0) for i in range(4)]
    for index, trajectory in enumerate(batch):
        trajectory.reward = float(index % 2)
    kind = KINDS["discriminative"]
    earlier = kind.trainer.fresh(DiscriminativeCriticSpec(optimizer={"lr": 1e-2}), tiny_llama_dir, 0)
    for _ in range(3):
        earlier.train_step(batch)
    saved = earlier.save(tmp_path / "critic")
    spec = DiscriminativeCriticSpec(model_path=str(saved))
    started = kind.trainer.fresh(spec, tiny_llama_dir, 0)
    for mine, theirs in zip(started.predict(batch), earlier.predict(batch), strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert kind.untrained_weights(spec, tiny_llama_dir, tmp_path / "scratch") == saved
    fresh = kind.trainer.fresh(DiscriminativeCriticSpec(), tiny_llama_dir, 0)
    assert not np.allclose(fresh.predict(batch)[0], earlier.predict(batch)[0], atol=1e-3)
