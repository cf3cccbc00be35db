"""Policy loading and the critic convention: backbone copied from the policy, fresh scalar head,
HF save/load round trip, per-token values aligned with trajectory tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from lecritique.config import PolicyModelSpec
from lecritique.models.critic import (
    critic_from_policy,
    critic_values,
    load_critic,
    state_value_positions,
    value_outputs,
)
from lecritique.models.policy import load_policy
from lecritique.models.templates import ChatTemplateConfig
from lecritique.models.tiny_arch import write_random_tiny_policy

ALPHABET = "1234.\nrc="


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_tiny_policy(tmp_path_factory.mktemp("policy") / "p", ALPHABET, seed=3)


def test_load_policy_returns_a_causal_lm_and_left_padding_tokenizer(policy_dir: Path) -> None:
    model, tokenizer = load_policy(policy_dir)
    assert model.config.model_type == "llama"
    assert type(model).__name__ == "LlamaForCausalLM"
    assert tokenizer.padding_side == "left"
    assert tokenizer.eos_token_id == model.config.eos_token_id
    assert model.dtype == torch.float32
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_policy(policy_dir.parent / "missing")


def test_the_policy_spec_parses_template_variants() -> None:
    config = PolicyModelSpec.model_validate(
        {"path": "/m", "template": {"kind": "chat", "system_prompt": "hi"}}
    )
    assert isinstance(config.template, ChatTemplateConfig)
    assert PolicyModelSpec(path="/m").template.kind == "plain"
    with pytest.raises(ValidationError, match="template"):
        PolicyModelSpec.model_validate({"path": "/m", "template": {"kind": "jinja"}})


def test_critic_backbone_is_the_policy_and_its_head_is_fresh(policy_dir: Path) -> None:
    policy, _ = load_policy(policy_dir)
    torch.manual_seed(0)
    critic = critic_from_policy(policy_dir)
    torch.manual_seed(1)
    other = critic_from_policy(policy_dir)
    policy_state = policy.state_dict()
    critic_state = critic.state_dict()
    backbone = [name for name in critic_state if name.startswith("model.")]
    assert len(backbone) == len([n for n in policy_state if n.startswith("model.")]) > 0
    for name in backbone:
        assert torch.equal(critic_state[name], policy_state[name]), name
    head = [name for name in critic_state if not name.startswith("model.")]
    assert sorted(head) == ["score.bias", "score.weight"], "one scalar head and nothing else"
    assert critic_state["score.weight"].shape == (1, policy.config.hidden_size)
    assert not torch.equal(critic_state["score.weight"], other.state_dict()["score.weight"])
    assert "score.weight" not in policy_state
    assert critic.config.num_labels == 1


def test_critic_save_load_round_trip(policy_dir: Path, tmp_path: Path) -> None:
    critic = critic_from_policy(policy_dir)
    with torch.no_grad():
        critic.score.weight.normal_(0.0, 1.0)  # a trained-looking head, not the init
    critic.save_pretrained(str(tmp_path / "critic"))
    loaded = load_critic(tmp_path / "critic")
    ids = torch.tensor([[2, 5, 6, 7, 8, 4], [2, 9, 10, 11, 12, 5]])
    mask = torch.ones_like(ids)
    critic.eval()
    assert torch.equal(value_outputs(critic, ids, mask), value_outputs(loaded, ids, mask))
    assert value_outputs(loaded, ids, mask).shape == (2, 6)
    with pytest.raises(ValueError, match="not a critic"):
        load_critic(policy_dir)


def test_critic_values_align_with_trajectory_tokens(policy_dir: Path) -> None:
    critic = critic_from_policy(policy_dir).eval()
    with torch.no_grad():
        critic.score.weight.normal_(0.0, 1.0)
    rng = np.random.default_rng(0)
    sequences = [
        (rng.integers(4, 13, size=p).tolist(), rng.integers(4, 13, size=t).tolist())
        for p, t in [(3, 5), (1, 9), (7, 2), (4, 4), (2, 1)]
    ]
    batched = critic_values(critic, sequences, batch_size=2)
    for (prefix, tokens), values in zip(sequences, batched, strict=True):
        assert values.dtype == np.float32 and values.shape == (len(tokens),)
        assert np.all((values > 0) & (values < 1))
        for t in range(len(tokens)):
            # V(h_t): the critic has read the prefix and tokens[:t], nothing more.
            ids = torch.tensor([prefix + tokens[:t]])
            with torch.no_grad():
                logit = value_outputs(critic, ids, torch.ones_like(ids))[0, -1]
            assert values[t] == pytest.approx(float(torch.sigmoid(logit)), abs=1e-5)
    raw = critic_values(critic, sequences[:1], sigmoid=False)[0]
    assert np.allclose(1 / (1 + np.exp(-raw)), batched[0], atol=1e-6)
    with pytest.raises(ValueError, match="prefix_len"):
        critic_values(critic, [([], [5, 6])])


def test_state_value_positions() -> None:
    assert state_value_positions(3, 4).tolist() == [2, 3, 4, 5]
