"""The critic's size and start apart from the policy's: ``critic.tiny {layers, hidden}``,
``critic.init: policy | fresh``, and ``critic.model_path`` of any model with the policy's tokenizer.
Combinations that cannot be built are refused, naming the field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lecritique.config import SpecError, parse_spec
from lecritique.critics.kinds import critic_kind
from lecritique.models.critic import CriticShapeError, load_critic
from lecritique.models.policy import load_policy
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
from lecritique.trajectory import Trajectory

ALPHABET = "1234.\nrc="


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_tiny_policy(tmp_path_factory.mktemp("policy") / "p", ALPHABET, seed=3)


def critic_spec(**critic):
    return parse_spec(
        {
            "name": "shapes",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
            "policy": {"path": "/unused"},
            "critic": {"context": "none", **critic},
        }
    ).critic


def build(policy_dir: Path, **critic):
    spec = critic_spec(**critic)
    return critic_kind(spec).trainer.fresh(spec, policy_dir, 0)


def parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_a_deeper_critic_starts_from_the_policy_where_shapes_match(policy_dir):
    policy, _ = load_policy(policy_dir)
    default = build(policy_dir).engine.model
    deep = build(policy_dir, tiny={"layers": 8}).engine.model
    assert deep.config.num_hidden_layers == 8 and deep.config.num_labels == 1
    # Four times the policy's decoder layers: about four times the critic's parameters.
    assert 3.5 < parameters(deep) / parameters(default) < 4.1
    ours, theirs = deep.state_dict(), policy.state_dict()
    for name in (
        "model.embed_tokens.weight",
        "model.norm.weight",
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.1.self_attn.q_proj.weight",
    ):
        assert torch.equal(ours[name], theirs[name]), name
    # Layers the policy does not have are fresh.
    assert not torch.equal(
        ours["model.layers.2.mlp.up_proj.weight"], theirs["model.layers.1.mlp.up_proj.weight"]
    )


def test_a_wider_critic_is_fresh_and_trains(policy_dir):
    wide = build(policy_dir, tiny={"hidden": 256}, init="fresh")
    model = wide.engine.model
    assert (
        model.config.hidden_size == 256
        and model.config.intermediate_size == 2 * TinyArchitecture().intermediate_size
    )
    policy, _ = load_policy(policy_dir)
    assert not torch.equal(
        model.state_dict()["model.layers.0.mlp.up_proj.weight"][:128, :128],
        policy.state_dict()["model.layers.0.mlp.up_proj.weight"][:128, :128],
    )
    trajectory = Trajectory(
        "t",
        "task",
        0,
        np.array([1, 2]),
        np.array([3, 4, 5]),
        np.array([True] * 3),
        np.zeros(3),
        np.zeros(3),
        1.0,
        0,
    )
    metrics = wide.train_step([trajectory, trajectory])
    assert np.isfinite(metrics["loss"]) and metrics["step"] == 1.0


def test_a_fresh_critic_of_the_policys_shape_copies_nothing(policy_dir):
    policy, _ = load_policy(policy_dir)
    fresh = build(policy_dir, init="fresh").engine.model
    assert fresh.config.num_hidden_layers == policy.config.num_hidden_layers
    assert not torch.equal(
        fresh.state_dict()["model.embed_tokens.weight"], policy.state_dict()["model.embed_tokens.weight"]
    )


def test_combinations_that_cannot_be_built_are_refused_naming_the_field(policy_dir, tmp_path):
    with pytest.raises(CriticShapeError, match=r"critic.init: 'policy' .* hidden size 128 \(got 256\)"):
        build(policy_dir, tiny={"hidden": 256})
    with pytest.raises(CriticShapeError, match=r"critic.tiny.hidden: 130 is not divisible by the policy's 4"):
        build(policy_dir, tiny={"hidden": 130}, init="fresh")
    with pytest.raises(SpecError, match=r"critic.tiny: a critic started from critic.model_path"):
        critic_spec(model_path="/m", tiny={"layers": 4})
    with pytest.raises(SpecError, match=r"critic.init: 'fresh' discards the weights of critic.model_path"):
        critic_spec(model_path="/m", init="fresh")
    with pytest.raises(SpecError, match=r"critic\.tiny\.layers"):
        critic_spec(tiny={"layers": 0})
    other = write_random_tiny_policy(tmp_path / "other", "abcdef", seed=1)
    with pytest.raises(
        CriticShapeError, match=r"critic.model_path: .* cannot read the policy's tokens: its vocabulary"
    ):
        build(policy_dir, model_path=str(other))


def test_model_path_may_be_any_model_with_the_policys_tokenizer(policy_dir, tmp_path):
    bigger = write_random_tiny_policy(
        tmp_path / "lm", ALPHABET, seed=5, architecture=TinyArchitecture(num_layers=3)
    )
    critic = build(policy_dir, model_path=str(bigger)).engine.model
    lm, _ = load_policy(bigger)
    assert critic.config.num_hidden_layers == 3 and critic.config.num_labels == 1
    assert torch.equal(
        critic.state_dict()["model.layers.2.mlp.up_proj.weight"],
        lm.state_dict()["model.layers.2.mlp.up_proj.weight"],
    )
    saved = build(policy_dir, tiny={"layers": 3})
    saved.save(tmp_path / "critic")
    again = build(
        policy_dir, model_path=str(tmp_path / "critic")
    ).engine.model  # a saved critic keeps its head
    assert torch.equal(again.state_dict()["score.weight"], saved.engine.model.state_dict()["score.weight"])


def test_critic_eval_measures_the_critic_a_run_would_start_from(policy_dir, tmp_path):
    spec = critic_spec(tiny={"layers": 3})
    untrained = critic_kind(spec).untrained_weights(spec, policy_dir, tmp_path / "untrained")
    assert load_critic(untrained).config.num_hidden_layers == 3
    lm = write_random_tiny_policy(tmp_path / "lm", ALPHABET, seed=5)
    backbone = critic_spec(model_path=str(lm))
    assert (
        load_critic(
            critic_kind(backbone).untrained_weights(backbone, policy_dir, tmp_path / "b")
        ).config.num_labels
        == 1
    )
