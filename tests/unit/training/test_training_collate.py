"""Collation: which logit scores which token, where the critic reads V(h_t), and input errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lecritique.models.critic import critic_from_policy, value_outputs
from lecritique.training.collate import (
    collate_critic,
    collate_policy,
    split_by_token_budget,
    token_logprobs,
)
from lecritique.training.distributed import shard_indices
from lecritique.trajectory import Trajectory
from tests.unit.training.training_helpers import VOCAB_SIZE, make_trajectory


def _trajectory(prompt: list[int], tokens: list[int], policy: list[bool], **extra: object) -> Trajectory:
    n = len(tokens)
    fields: dict[str, object] = {
        "trajectory_id": "x",
        "task_id": "task",
        "group_id": 0,
        "prompt_ids": np.array(prompt),
        "token_ids": np.array(tokens),
        "policy_mask": np.array(policy),
        "logprobs": -np.arange(1, n + 1, dtype=np.float32) / 10,
        "step_ids": np.zeros(n),
        "reward": 1.0,
        "policy_version": 0,
        "advantages": np.arange(1, n + 1, dtype=np.float32),
    }
    fields.update(extra)
    return Trajectory(**fields)  # type: ignore[arg-type]


def test_policy_columns_describe_the_token_after_each_position() -> None:
    short = _trajectory([5, 6], [7, 8, 9], [True, False, True])
    long = _trajectory([3], [4, 5, 6, 7], [True, True, True, True])
    batch = collate_policy([short, long])
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [3, 4, 5, 6, 7]]
    batch = collate_policy([short, _trajectory([3], [4], [True])])
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [3, 4, 0, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert batch.target_ids.tolist() == [[6, 7, 8, 9], [4, 0, 0, 0]]
    # Token t of a prompt of length P is scored at column P + t - 1; the env token (t=1) is masked.
    assert batch.loss_mask.tolist() == [[False, True, False, True], [True, False, False, False]]
    torch.testing.assert_close(batch.old_logprobs[0], torch.tensor([0.0, -0.1, 0.0, -0.3]))
    torch.testing.assert_close(batch.advantages[0], torch.tensor([0.0, 1.0, 0.0, 3.0]))
    assert batch.num_policy_tokens == 3


def test_token_logprobs_read_the_logit_one_position_before_the_token() -> None:
    rng = np.random.default_rng(0)
    trajectories = [
        make_trajectory(rng, i, prompt_len=2 + i, num_tokens=5 + i, advantage=1.0) for i in range(3)
    ]
    batch = collate_policy(trajectories)
    batch_size, width = batch.input_ids.shape
    # Logits that put all mass on input_ids[p + 1] at position p: aligned logprobs are ~0,
    # any off-by-one would score a different token at ~-20.
    logits = torch.full((batch_size, width, VOCAB_SIZE), -20.0)
    for row in range(batch_size):
        for position in range(width - 1):
            logits[row, position, batch.input_ids[row, position + 1]] = 20.0
    logprobs = token_logprobs(logits, batch.target_ids)
    assert logprobs.shape == batch.loss_mask.shape
    assert torch.all(logprobs[batch.loss_mask] > -1e-6)
    for row, trajectory in enumerate(trajectories):
        prompt_len = trajectory.prompt_ids.shape[0]
        for t, token in enumerate(trajectory.token_ids):
            assert int(batch.target_ids[row, prompt_len + t - 1]) == int(token)
            assert float(batch.old_logprobs[row, prompt_len + t - 1]) == pytest.approx(
                float(trajectory.logprobs[t])
            )


def test_token_logprobs_divide_by_the_rollout_temperature() -> None:
    logits = torch.tensor([[[2.0, 0.0], [0.0, 0.0]]])
    targets = torch.tensor([[0]])
    expected = torch.log_softmax(torch.tensor([4.0, 0.0]), -1)[0]
    assert float(token_logprobs(logits, targets, temperature=0.5)[0, 0]) == pytest.approx(
        float(expected), rel=1e-5
    )


def test_critic_positions_follow_context_then_prompt_then_tokens() -> None:
    with_context = _trajectory([5, 6], [7, 8, 9], [True, False, True], critic_context_ids=np.array([1, 2, 3]))
    plain = _trajectory([4], [5, 6], [True, True])
    batch = collate_critic([with_context, plain])
    assert batch.input_ids.tolist() == [[1, 2, 3, 5, 6, 7, 8, 9], [4, 5, 6, 0, 0, 0, 0, 0]]
    # V(h_t) is read at C + P + t - 1.
    assert batch.value_positions.tolist() == [[4, 5, 6], [0, 1, 0]]
    assert batch.token_mask.tolist() == [[True, True, True], [True, True, False]]
    assert batch.target_mask.tolist() == [[True, False, True], [True, True, False]]
    # Monte-Carlo targets: the reward on every trained token.
    assert batch.targets.tolist() == [[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]


def test_critic_reads_the_model_output_at_the_position_before_each_token(tiny_llama_dir: Path) -> None:
    rng = np.random.default_rng(1)
    trajectories = [make_trajectory(rng, i, 3, 4 + i, critic_context_len=2 * i) for i in range(3)]
    critic = critic_from_policy(tiny_llama_dir)
    batch = collate_critic(trajectories)
    with torch.no_grad():
        gathered = value_outputs(critic, batch.input_ids, batch.attention_mask).gather(
            1, batch.value_positions
        )
        for row, trajectory in enumerate(trajectories):
            # Score the trajectory alone, unpadded: the value of the state before token t is the
            # output at the last position of the prefix that ends just before it.
            context = trajectory.critic_context_ids if trajectory.critic_context_ids is not None else []
            sequence = torch.tensor([[*context, *trajectory.prompt_ids, *trajectory.token_ids]])
            outputs = value_outputs(critic, sequence, torch.ones_like(sequence))[0]
            prefix = len(context) + trajectory.prompt_ids.shape[0]
            for t in range(trajectory.token_ids.shape[0]):
                assert float(gathered[row, t]) == pytest.approx(float(outputs[prefix + t - 1]), abs=1e-5)


def test_explicit_critic_targets_as_rows_or_a_padded_matrix() -> None:
    first = _trajectory([1], [2, 3, 4], [True, True, False])
    second = _trajectory([1], [2], [True])
    rows = [np.array([0.1, 0.2, 0.3]), np.array([0.4])]
    matrix = np.array([[0.1, 0.2, 0.3], [0.4, 9.0, 9.0]])
    for targets in (rows, matrix, torch.tensor(matrix)):
        batch = collate_critic([first, second], targets)
        torch.testing.assert_close(batch.targets, torch.tensor([[0.1, 0.2, 0.0], [0.4, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="targets has 1 rows for 2 trajectories"):
        collate_critic([first, second], rows[:1])
    with pytest.raises(ValueError, match="expected at least \\(3,\\)"):
        collate_critic([first, second], [np.array([0.1]), np.array([0.4])])


def test_bad_policy_inputs_raise_errors_naming_the_trajectory_and_field() -> None:
    good = _trajectory([1], [2, 3], [True, True])
    with pytest.raises(ValueError, match="'advantages' is missing"):
        collate_policy([good, _trajectory([1], [2], [True], advantages=None)])
    with pytest.raises(ValueError, match="'prompt_ids' is empty"):
        collate_policy([_trajectory([], [2], [True])])
    with pytest.raises(ValueError, match="token id 40 >= vocab size 32"):
        collate_policy([_trajectory([1], [40], [True])], vocab_size=32)
    with pytest.raises(ValueError, match="'logprobs' has a non-finite value"):
        collate_policy([_trajectory([1], [2], [True], logprobs=np.array([np.nan]))])
    with pytest.raises(ValueError, match="'logprobs' has a positive log-probability"):
        collate_policy([_trajectory([1], [2], [True], logprobs=np.array([0.5]))])
    with pytest.raises(ValueError, match="no policy tokens"):
        collate_policy([_trajectory([1], [2], [False])])
    with pytest.raises(ValueError, match="empty"):
        collate_policy([])
    with pytest.raises(ValueError, match="batch item 1 is a dict"):
        collate_policy([good, {}])  # type: ignore[list-item]
    mutated = _trajectory([1], [2, 3], [True, True])
    mutated.advantages = np.zeros(5, dtype=np.float32)
    with pytest.raises(
        ValueError, match=r"trajectory 0 \('x'\): field 'advantages' has shape \(5,\), expected \(2,\)"
    ):
        collate_policy([mutated])
    with pytest.raises(ValueError, match="'advantages' has shape"):
        _trajectory([1], [2, 3], [True, True], advantages=np.zeros(3))


def test_micro_batches_respect_the_token_budget_and_cover_every_row_once() -> None:
    lengths = [5, 9, 3, 9, 12, 1, 7]
    groups = split_by_token_budget(lengths, token_budget=20)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    for group in groups:
        assert len(group) == 1 or max(lengths[i] for i in group) * len(group) <= 20
    assert split_by_token_budget([30, 2], token_budget=10) == [[0], [1]]
    with pytest.raises(ValueError, match="token_budget"):
        split_by_token_budget([1], 0)


def test_shards_balance_tokens_deterministically() -> None:
    lengths = [2, 6, 3, 5, 2, 4]
    shards = shard_indices(lengths, 2)
    assert shards == shard_indices(lengths, 2)
    assert sorted(shards[0] + shards[1]) == list(range(6))
    assert [sum(lengths[i] for i in shard) for shard in shards] == [11, 11]
    assert shard_indices(lengths, 1) == [list(range(6))]
    with pytest.raises(ValueError, match="cannot be split across 3 ranks"):
        shard_indices([1, 2], 3)
