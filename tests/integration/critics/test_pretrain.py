"""``lecritique critic pretrain`` (Le Critique §7.1): the pretrained critic is what a later run's value
trainer starts from, training resumes, the split holds tasks out, bad input names its field.

The task: a dataset whose rows each name a character class; the random tiny ASCII policy answers
with two characters and earns 1 when one is in the class. Classes differ in how often random
characters hit them, so returns vary within and across tasks, and the critic can learn each
task's value from its privileged reference (the class) in seconds."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.config import parse_spec
from lecritique.config.runtime import ServiceRuntime
from lecritique.models.tiny_arch import write_random_tiny_policy
from lecritique.pretrain import PretrainConfig, pretrain
from lecritique.pretrain import collect as collect_module
from lecritique.pretrain import run as run_module
from lecritique.pretrain.train import split_by_task, train_epoch
from lecritique.training.checkpoint import TrainerCheckpoints
from lecritique.training.critic_trainer import CriticTrainer
from lecritique.weights import WeightStore
from services.value_trainer.server import build_value_trainer
from tests.integration.services.conftest import write_spec
from tests.unit.critics.conftest import text_trajectory

PATTERNS = [".", "Q", "[a-z]", "Q"]


@pytest.fixture(scope="module")
def character_classes(tmp_path_factory):
    rows = [
        {"prompt": f"find {PATTERNS[i % len(PATTERNS)]} #{i}", "answer": PATTERNS[i % len(PATTERNS)]}
        for i in range(64)
    ]
    path = tmp_path_factory.mktemp("classes") / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def class_spec(policy, rows, **critic):
    return {
        "name": "classes",
        "environment": {
            "kind": "dataset",
            "path": str(rows),
            "verifier": {"kind": "regex", "full_match": False},
        },
        "policy": {"path": str(policy)},
        "rollout": {"group_size": 4, "tasks_per_step": 4, "sampling": {"max_tokens": 2}},
        "critic": {"context": "reference", "optimizer": {"lr": 1e-3}, **critic},
    }


def settings(**overrides):
    values = {
        "tasks_per_policy": 16,
        "held_out_fraction": 0.5,
        "max_epochs": 2,
        "patience": 100,
        "batch_size": 16,
    }
    return PretrainConfig(**{**values, **overrides})


def test_a_later_runs_value_trainer_starts_from_the_pretrained_critic(
    ascii_model, character_classes, tmp_path, embedded_redis, redis_db
):
    spec = parse_spec(class_spec(ascii_model, character_classes))
    # Diverse policies: the spec's and a checkpoint of an "earlier run" (here a copy of it).
    earlier = shutil.copytree(ascii_model, tmp_path / "earlier" / "weights" / "policy" / "00000007")
    result = pretrain(
        spec, settings(max_epochs=3, policies=[str(earlier)]), tmp_path / "pretrain", show_progress=False
    )
    history = result.state.history
    assert [row["epoch"] for row in history] == [0, 1, 2, 3]
    assert result.state.best_ev > history[0]["held_out_ev"] + 0.05, history
    assert (tmp_path / "pretrain" / "ev.png").stat().st_size > 0
    summary = json.loads((tmp_path / "pretrain" / "summary.json").read_text())
    assert summary["critic_dir"] == str(result.critic_dir.resolve())
    assert summary["train_trajectories"] + summary["held_out_trajectories"] == 2 * 16 * 4
    assert len(summary["policies"]) == 2

    # A later run names it as critic.model_path: its value trainer publishes it as critic version 0.
    later = spec.model_copy(
        update={"critic": spec.critic.model_copy(update={"model_path": str(result.critic_dir)})}
    )
    runtime = ServiceRuntime(
        port=0,
        spec_path=tmp_path / "spec.json",
        experiment_id="later",
        weights_dir=tmp_path / "weights",
        redis_url=embedded_redis.url,
    )
    WeightStore(runtime.weights_dir, redis=redis_db, experiment="later").publish("policy", ascii_model)
    service = build_value_trainer(later, later.critic, runtime)
    version, published = service.store.latest("critic")
    assert version == 0
    saved, loaded = (
        load_file(result.critic_dir / "model.safetensors"),
        load_file(published / "model.safetensors"),
    )
    assert saved.keys() == loaded.keys()
    for name, tensor in saved.items():
        assert torch.equal(tensor, loaded[name]), name


def test_a_rerun_continues_from_the_checkpoint(ascii_model, character_classes, tmp_path, monkeypatch):
    spec = parse_spec(class_spec(ascii_model, character_classes))
    first = pretrain(spec, settings(max_epochs=1), tmp_path / "cut", show_progress=False)
    per_epoch = first.state.history[1]["updates"]
    assert first.state.epoch == 1 and first.state.stopped == "max_epochs"
    shutil.copytree(tmp_path / "cut" / "rollouts", tmp_path / "whole" / "rollouts")

    def no_playing(*args, **kwargs):
        raise AssertionError("a rerun must take the rollouts from the cache")

    monkeypatch.setattr(collect_module, "play_policy", no_playing)
    trained = []

    def spy(trainer, train, schedule, epoch, on_update):
        trained.append((epoch, trainer.steps))
        return train_epoch(trainer, train, schedule, epoch, on_update)

    monkeypatch.setattr(run_module, "train_epoch", spy)
    resumed = pretrain(spec, settings(max_epochs=3), tmp_path / "cut", show_progress=False)
    assert trained == [(2, per_epoch), (3, 2 * per_epoch)]  # epoch 1 is not trained again
    assert resumed.state.epoch == 3
    assert resumed.state.history[:2] == first.state.history[:2]
    assert [row["updates"] for row in resumed.state.history] == [0, per_epoch, 2 * per_epoch, 3 * per_epoch]
    meta, _ = TrainerCheckpoints(tmp_path / "cut" / "checkpoint").latest()
    assert meta.step == 3 * per_epoch and meta.extra["epoch"] == 3
    cut = restored(spec, tmp_path / "cut")

    # The same three epochs in one go: the same critic (AdamW's moments and step count continued).
    monkeypatch.undo()
    whole = pretrain(spec, settings(max_epochs=3), tmp_path / "whole", show_progress=False)
    assert whole.state.history == resumed.state.history
    straight = restored(spec, tmp_path / "whole")
    for (name, tensor), (_, other) in zip(
        straight.model.state_dict().items(), cut.model.state_dict().items(), strict=True
    ):
        assert torch.equal(tensor, other), name
    # AdamW's step count (bias correction) continued across the cut rather than restarting.
    assert adam_steps(cut) == adam_steps(straight) and len(adam_steps(cut)) == 1


def adam_steps(trainer):
    return {float(state["step"]) for state in trainer.engine.optimizer.state_dict()["state"].values()}


def restored(spec, out):
    """A critic of the saved architecture with ``out``'s newest checkpoint loaded (weights and AdamW)."""
    trainer = CriticTrainer.load(out / "critic", spec.critic)
    checkpoints = TrainerCheckpoints(out / "checkpoint")
    checkpoints.load(trainer, checkpoints.latest()[1])
    return trainer


def test_the_held_out_split_keeps_whole_tasks_apart(ascii_tokenizer):
    trajectories = [
        text_trajectory(
            ascii_tokenizer,
            f"task {task}",
            ["a"],
            float(member % 2),
            group_id=policy * 100 + task,
            name=f"{policy}-{task}-{member}",
        )
        for policy in range(2)
        for task in range(10)
        for member in range(4)
    ]
    for trajectory in trajectories:
        trajectory.task_id = f"task-{trajectory.group_id % 100}"  # both policies play the same tasks
    train, held_out = split_by_task(trajectories, 0.3, seed=5)
    assert {t.task_id for t in train}.isdisjoint({t.task_id for t in held_out})
    assert {t.group_id for t in train}.isdisjoint({t.group_id for t in held_out})
    assert len({t.task_id for t in held_out}) == 3 and len(train) + len(held_out) == len(trajectories)
    assert {t.trajectory_id for t in split_by_task(trajectories, 0.3, seed=5)[1]} == {
        t.trajectory_id for t in held_out
    }
    with pytest.raises(ValueError, match="tasks_per_policy"):
        split_by_task(trajectories[:4], 0.3, seed=5)


def _pretrain_cli(spec, tmp_path, *extra):
    path = write_spec(tmp_path / "spec.yaml", spec)
    return CliRunner().invoke(
        app, ["critic", "pretrain", str(path), "--out", str(tmp_path / "out"), "--no-progress", *extra]
    )


@pytest.mark.parametrize(
    ("critic", "extra", "message"),
    [
        ({"kind": "generative"}, [], "critic.kind: 'generative' cannot be pretrained"),
        ({"kind": "frozen_llm", "hindsight": False}, [], "critic.kind: 'frozen_llm' cannot be pretrained"),
        (None, [], "critic: the spec has no critic section"),
        (
            {},
            ["--policy", "/nowhere/policy"],
            "policies: Value error, policies.0: '/nowhere/policy' is not a saved policy",
        ),
        ({}, ["--held-out-fraction", "1.5"], "held_out_fraction: Input should be less than 1"),
        ({}, ["--max-epochs", "0"], "max_epochs: Input should be greater than or equal to 1"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    ascii_model, character_classes, tmp_path, critic, extra, message
):
    spec = class_spec(ascii_model, character_classes)
    spec.pop("critic")
    if critic is not None:
        spec["critic"] = critic
    else:
        spec["estimator"] = {"name": "rloo"}  # a spec without a critic is valid with a critic-free estimator
    result = _pretrain_cli(spec, tmp_path, *extra)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()


def test_a_policy_with_another_tokenizer_is_refused(ascii_model, character_classes, tmp_path):
    other = write_random_tiny_policy(tmp_path / "other", "abc", seed=0)
    result = _pretrain_cli(
        class_spec(ascii_model, character_classes),
        tmp_path,
        "--policy",
        str(other),
        "--tasks-per-policy",
        "2",
    )
    assert result.exit_code == 2, result.output
    assert "does not share the spec policy's tokenizer" in " ".join(result.output.split())
