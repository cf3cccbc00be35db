"""``lecritique critic sweep`` (issue 45 item 3) and ``critic.head_init``: the replay's rules hold in the
sweep, a ``mean_return`` head starts at the batch's mean return (and never re-starts a trained one),
the sweep ranks settings by held-out EV at a budget, resumes, and keeps its docs block in step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.config import parse_spec
from lecritique.pretrain.sweep import SweepConfig, critic_with, settings_of
from lecritique.pretrain.sweep_report import margin, regenerate, render
from lecritique.training.config import CriticTrainerConfig, OptimizerConfig
from lecritique.training.critic_trainer import CriticTrainer
from tests.integration.critics.test_pretrain import character_classes, class_spec  # noqa: F401  (fixture)
from tests.integration.services.conftest import write_spec
from tests.unit.critics.conftest import text_trajectory

REPO = Path(__file__).resolve().parents[3]


def _trajectories(tokenizer, rewards):
    return [
        text_trajectory(tokenizer, f"task {i}", ["ab"], reward, group_id=i, name=f"t{i}")
        for i, reward in enumerate(rewards)
    ]


@pytest.mark.parametrize(("loss", "expected"), [("bce", float(np.log(0.25 / 0.75))), ("mse", 0.25)])
def test_a_mean_return_head_starts_at_the_first_batchs_mean_return(
    ascii_model, ascii_tokenizer, loss, expected
):
    config = CriticTrainerConfig(loss=loss, head_init="mean_return", optimizer=OptimizerConfig(lr=1e-3))
    trainer = CriticTrainer.from_policy(ascii_model, config)
    batch = _trajectories(ascii_tokenizer, [1.0, 0.0, 0.0, 0.0])
    before = np.concatenate(trainer.predict(batch))
    assert np.allclose(before, 0.5 if loss == "bce" else 0.0)  # a constant until the first update
    head = trainer.model.score
    trainer.train_step(batch)
    # One AdamW step moves each parameter by about lr: the bias sits at the mean return's value.
    assert head.bias.item() == pytest.approx(expected, abs=2e-3)
    assert head.weight.abs().max().item() <= 2e-3

    # A trainer resumed with updates behind it keeps its head: only a fresh head is started.
    trained = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    again = CriticTrainer.from_policy(ascii_model, config)
    again.model.load_state_dict(trained)
    again.engine.steps = trainer.steps
    again.train_step(_trajectories(ascii_tokenizer, [1.0, 1.0, 1.0, 1.0]))
    assert abs(again.model.score.bias.item() - expected) < 5e-3


def test_a_saved_critic_keeps_its_head(ascii_model, ascii_tokenizer, tmp_path):
    trained = CriticTrainer.from_policy(ascii_model, CriticTrainerConfig(optimizer=OptimizerConfig(lr=1e-2)))
    trained.train_step(_trajectories(ascii_tokenizer, [1.0, 0.0, 1.0, 1.0]))
    trained.save(tmp_path / "critic")
    weights = trained.model.score.weight.detach().clone()
    config = CriticTrainerConfig(head_init="mean_return", optimizer=OptimizerConfig(lr=1e-12))
    for loaded in (
        CriticTrainer.load(tmp_path / "critic", config),
        CriticTrainer.from_model_path(tmp_path / "critic", ascii_model, config),
    ):
        loaded.train_step(_trajectories(ascii_tokenizer, [0.0, 0.0, 0.0, 0.0]))
        assert torch.allclose(loaded.model.score.weight, weights, atol=1e-6)
    # Another model's backbone gets a fresh head, so the setting applies to it.
    backbone = CriticTrainer.from_model_path(ascii_model, ascii_model, config)
    assert backbone.model.score.weight.abs().max().item() == 0.0


def test_a_grid_setting_is_validated_naming_its_field(ascii_model, character_classes):  # noqa: F811
    spec = parse_spec(class_spec(ascii_model, character_classes))
    assert len(settings_of(SweepConfig(updates=4).grid)) == 24
    assert critic_with(spec.critic, {"optimizer.lr": 3e-4, "head_init": "mean_return"}).optimizer.lr == 3e-4
    with pytest.raises(Exception, match="critic.loss"):
        critic_with(spec.critic, {"loss": "hinge"})
    with pytest.raises(ValueError, match="grid.context"):
        SweepConfig(updates=4, grid={"context": ["none", "reference"]})


def _sweep_cli(spec_path, out, *extra):
    return CliRunner().invoke(
        app,
        [
            "critic", "sweep", str(spec_path), "--out", str(out), "--updates", "6", "--long-updates", "9",
            "--eval-every", "3", "--seeds", "0,1", "--grid", "optimizer.lr=1e-5,3e-3",
            "--grid", "head_init=random,mean_return", "--no-progress", *extra,
        ],
    )  # fmt: skip


def test_the_sweep_ranks_settings_by_held_out_ev_resumes_and_writes_its_doc_block(
    ascii_model,
    character_classes,  # noqa: F811
    tmp_path,
):
    spec = class_spec(ascii_model, character_classes)
    spec["rollout"]["tasks_per_step"] = 2  # 8 fresh rows a push, batch 8 (the policy batch)
    path = write_spec(tmp_path / "spec.yaml", spec)
    doc = tmp_path / "docs" / "critics.md"
    doc.parent.mkdir()
    doc.write_text("# Critics\n\nhand-written text\n")
    result = _sweep_cli(path, tmp_path / "out", "--doc", str(doc), "--name", "classes-reference")
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert len(document["results"]) == 4 * 2
    for record in document["results"]:
        assert [h["updates"] for h in record["history"]] == [0, 3, 6, 9]
        assert record["budget_most_uses"] <= document["max_reuse"]
        assert record["budget_ev"] == record["history"][2]["held_out_ev"]
    # Enough rows were played that the budget never samples a row more than max_reuse times.
    assert document["trajectories"] * 0.8 >= 6 * document["batch_size"] / document["max_reuse"]
    # Ranked by the mean over seeds at the budget; the lead is paired by seed (same split, same rows).
    verdict = margin(document)
    means = {(r["setting"]["optimizer.lr"], r["setting"]["head_init"]): [] for r in document["results"]}
    for r in document["results"]:
        means[(r["setting"]["optimizer.lr"], r["setting"]["head_init"])].append(r)
    ranked = sorted(means.values(), key=lambda rs: -np.mean([r["budget_ev"] for r in rs]))
    assert verdict["winner"] == ranked[0][0]["setting"] and verdict["runner_up"] == ranked[1][0]["setting"]
    assert verdict["leads"] == pytest.approx(
        [a["budget_ev"] - b["budget_ev"] for a, b in zip(*ranked[:2], strict=False)]
    )
    assert "Best at the budget" in (tmp_path / "out" / "sweep.md").read_text()

    # A rerun trains nothing again; the docs block is regenerated from the JSON beside the doc.
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    again = _sweep_cli(path, tmp_path / "out")
    assert again.exit_code == 0, again.output
    assert (tmp_path / "out" / "results.jsonl").read_text().splitlines() == lines
    text = doc.read_text()
    assert text.startswith("# Critics\n\nhand-written text\n") and render(document).strip() in text
    assert regenerate(doc) == text


def test_the_sweep_and_pretraining_start_the_critic_a_run_would_start(
    ascii_model,
    character_classes,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """``critic.tiny`` and ``critic.init`` were ignored offline: the sweep and ``critic pretrain``
    started every critic from the policy's backbone (found measuring a fresh 4.5x critic on
    arithmetic, whose numbers came out identical to the fresh one of the policy's shape)."""
    import lecritique.pretrain.sweep as sweep_module
    from lecritique.critics.kinds import starting_critic
    from lecritique.pretrain.run import _fresh_trainer

    started: list[tuple[int, int]] = []

    def recorded(critic, policy_dir, seed):  # type: ignore[no-untyped-def]
        trainer = starting_critic(critic, policy_dir, seed)
        started.append((trainer.model.config.num_hidden_layers, trainer.model.config.hidden_size))
        return trainer

    monkeypatch.setattr(sweep_module, "starting_critic", recorded)
    spec = class_spec(ascii_model, character_classes)
    spec["rollout"]["tasks_per_step"] = 2
    path = write_spec(tmp_path / "spec.yaml", spec)
    shape = ["--set", "critic.tiny={layers: 2, hidden: 32}", "--set", "critic.init=fresh"]
    result = CliRunner().invoke(
        app,
        [
            "critic", "sweep", str(path), "--out", str(tmp_path / "out"), "--updates", "3",
            "--grid", "optimizer.lr=1e-3", "--grid", "head_init=random", "--grid", "loss=mse",
            "--no-progress", *shape,
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert started == [(2, 32)]  # the policy is 1 layer of 64
    document = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert document["critic"]["tiny"] == {"layers": 2, "hidden": 32} and document["critic"]["init"] == "fresh"

    critic = parse_spec(
        {**spec, "critic": {**spec["critic"], "tiny": {"hidden": 48}, "init": "fresh"}}
    ).critic
    pretrained = _fresh_trainer(critic, str(ascii_model), 0)
    assert pretrained.model.config.hidden_size == 48
    policy_shaped = _fresh_trainer(parse_spec(spec).critic, str(ascii_model), 0)
    assert policy_shaped.model.config.hidden_size == 64


def test_a_bad_grid_or_variant_is_refused_naming_it(ascii_model, character_classes, tmp_path):  # noqa: F811
    path = write_spec(tmp_path / "spec.yaml", class_spec(ascii_model, character_classes))
    bad = _sweep_cli(path, tmp_path / "out", "--grid", "optimizer.lr")
    assert bad.exit_code == 2 and "--grid 'optimizer.lr'" in bad.output
    bad = CliRunner().invoke(
        app,
        ["critic", "sweep", str(REPO / "examples/studies/critic-pays.yaml"), "--out", str(tmp_path / "o"),
         "--updates", "4", "--variant", "nope"],
    )  # fmt: skip
    assert bad.exit_code == 2 and "no variant 'nope'" in bad.output


def test_the_sweep_blocks_in_docs_are_in_step_with_their_data():
    doc = REPO / "docs" / "critics.md"
    if not (REPO / "docs" / "critic-sweep.json").is_file():
        pytest.fail("docs/critic-sweep.json is missing: the sweep tables in docs/critics.md have no data")
    assert regenerate(doc) == doc.read_text(), "run `lecritique critic sweep ... --doc docs/critics.md`"


def _result(lr, seed, ev):
    return {
        "setting": {"optimizer.lr": lr},
        "seed": seed,
        "budget_ev": ev,
        "budget_train_ev": ev,
        "best_ev": ev,
        "best_at": 8,
        "history": [],
        "train_rows": 80,
        "held_out_rows": 20,
    }


def test_the_table_ranks_on_common_seeds_and_names_the_leader_over_more_seeds():
    results = [_result(1e-3, 0, 0.30), _result(1e-4, 0, 0.25), _result(3e-3, 0, 0.40)]
    results += [_result(1e-3, s, ev) for s, ev in [(1, 0.20), (2, 0.22)]]
    results += [_result(1e-4, s, ev) for s, ev in [(1, 0.27), (2, 0.26)]]
    document = {
        "policy": "p/model", "policy_seed": 0, "mean_return": 0.3, "context": "reference", "trajectories": 100,
        "grid": {"optimizer.lr": [1e-4, 1e-3, 3e-3]}, "updates": 8, "long_updates": None, "batch_size": 4,
        "max_reuse": 2, "capacity": 16, "fresh_per_push": 4, "updates_per_push": None, "lambda_target": 1.0,
        "seeds": [0, 1, 2], "results": results,
    }  # fmt: skip
    text = render(document)
    # Seed 0 is the one every setting has: 3e-3 leads there, by +0.10 over 1e-3.
    assert (
        "Best at the budget: **optimizer.lr 0.003** (held-out EV 0.400), ahead of optimizer.lr 0.001" in text
    )
    # Over the three seeds the two leaders share, 1e-4 is ahead of 1e-3 (paired leads -0.05, +0.07, +0.04).
    assert "Among the 2 settings run on 3 seeds, best by their mean: **optimizer.lr 0.0001**" in text
    assert "per seed -0.050, +0.070, +0.040" in text
