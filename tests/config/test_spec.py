import pytest

from lecritique.config import SpecError, load_spec, parse_spec

BASE = {
    "name": "unit",
    "environment": {"kind": "sudoku", "size": 4, "empty_cells": [3, 4]},
    "policy": {"tiny": "sudoku-mini"},
    "critic": {"context": "reference"},
}


def spec(**changes):
    data = {**BASE, **changes}
    return {k: v for k, v in data.items() if v is not None}


def test_defaults_follow_the_paper():
    parsed = parse_spec(spec())
    assert parsed.estimator.name == "tether" and parsed.estimator.ema_decay == 0.95
    assert parsed.critic.kind == "discriminative" and parsed.critic.warmup_updates == 20
    assert parsed.critic.replay.capacity == 256 and parsed.critic.replay.max_reuse == 2
    assert parsed.critic.optimizer.lr == 1e-5 and parsed.critic.loss == "bce"
    assert parsed.orchestrator.max_off_policy_steps == 8
    assert parsed.batch_size == 32 * 4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"critic": {"context": "reference", "replay": {"capcity": 3}}}, "critic.discriminative.replay.capcity: unknown field"),
        ({"estimator": {"name": "tether", "ema": 0.9}}, "estimator.tether.ema: unknown field"),
        ({"estimator": {"name": "bogus"}}, "estimator"),
        ({"environment": {"kind": "sudoku", "sizes": 4}}, "environment.sudoku.sizes: unknown field"),
        ({"critic": None}, "needs a critic"),
        ({"rollout": {"group_size": 1}}, "group_size must be >= 2"),
        ({"name": "Bad_Name"}, "name: .*lowercase"),  # named, not echoed back
        ({"policy": {"tiny": "sudoku-mini", "path": "/x"}}, "exactly one of 'path' and 'tiny'"),
        ({"critic": {"context": "oracle"}}, "critic.discriminative.context"),
    ],
)
def test_errors_name_the_field(changes, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec(**changes))


def test_critic_free_estimators_need_no_critic():
    assert parse_spec(spec(critic=None, estimator={"name": "mean"})).critic is None


def test_load_spec_reports_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(broken)
    with pytest.raises(SpecError, match="mapping"):
        parse_spec(["not", "a", "mapping"])
