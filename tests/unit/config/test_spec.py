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
        (
            {"critic": {"context": "reference", "replay": {"capcity": 3}}},
            "critic.replay.capcity: unknown field 'capcity'; did you mean 'capacity'",
        ),
        ({"estimator": {"name": "tether", "ema": 0.9}}, "estimator.ema: unknown field 'ema'"),
        ({"estimator": {"name": "bogus"}}, "estimator"),
        (
            {"environment": {"kind": "sudoku", "sizes": 4}},
            "environment.sizes: unknown field 'sizes'; did you mean 'size'",
        ),
        ({"critic": None}, "needs a critic"),
        ({"rollout": {"group_size": 1}}, "group_size must be >= 2"),
        ({"name": "Bad_Name"}, "name: .*lowercase"),  # named, not echoed back
        ({"policy": {"tiny": "sudoku-mini", "path": "/x"}}, "exactly one of 'path' and 'tiny'"),
        ({"critic": {"context": "oracle"}}, "critic.context"),
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


def test_tether_buckets_default_to_max_tokens_times_the_turn_limit():
    # 4x4 Sudoku with at most 4 empty cells: 4 turns of at most 8 policy tokens.
    parsed = parse_spec(
        spec(rollout={"sampling": {"max_tokens": 8}}, estimator={"name": "tether", "buckets": 4})
    )
    assert parsed.estimator.max_length == 32
    assert parsed.estimator.build().max_length == 32
    single_turn = spec(
        environment={"kind": "arithmetic"},
        policy={"tiny": "arithmetic"},
        estimator={"name": "tether", "buckets": 2},
    )
    assert parse_spec(single_turn).estimator.max_length == 32  # default sampling.max_tokens, one turn
    explicit = parse_spec(spec(estimator={"name": "tether", "buckets": 2, "max_length": 100}))
    assert explicit.estimator.max_length == 100
    assert parse_spec(spec()).estimator.max_length is None  # one bucket: no edges to place


def test_auto_lambda_resolves_from_the_rollout_and_survives_a_round_trip():
    parsed = parse_spec(
        spec(
            rollout={"sampling": {"max_tokens": 8}},
            estimator={"name": "gae", "lambda_gae": "auto", "lambda_target": "auto"},
        )
    )
    assert parsed.estimator.lambda_gae == "auto" and parsed.estimator.max_length == 32
    assert parsed.estimator.build().metrics() == pytest.approx(
        {"gae_lambda": 0.4 ** (1 / 32), "gae_lambda_target": 0.4 ** (1 / 32)}
    )
    # spec.json (what every service reads) keeps 'auto' and the length it resolves against
    assert parse_spec(parsed.model_dump(mode="json")) == parsed
    with pytest.raises(SpecError, match="lambda_gae"):
        parse_spec(spec(estimator={"name": "gae", "lambda_gae": "sometimes"}))
    with pytest.raises(SpecError, match="lambda_target"):
        parse_spec(spec(estimator={"name": "gae", "lambda_target": 1.5}))


@pytest.mark.parametrize(
    ("environment", "max_model_len", "max_tokens", "accepted"),
    [
        # examples/codeio before the fix: the context is the response budget, no prompt fits.
        ({"kind": "codeio"}, 8192, 8192, False),
        ({"kind": "codeio"}, 12287, 8192, False),  # 1 token short of Le Critique's 4096 + 8192
        ({"kind": "codeio"}, 12288, 8192, True),
        ({"kind": "sudoku", "size": 4}, 64, 64, False),
        ({"kind": "sudoku", "size": 4}, 65, 64, True),
    ],
)
def test_an_engine_context_must_hold_a_prompt_and_a_response(
    environment, max_model_len, max_tokens, accepted
):
    """The episode player ends an episode whose context cannot hold the next action (reward 0):
    a spec whose vLLM context leaves no room beside the response budget would train on nothing."""
    data = spec(
        environment=environment,
        critic=None,
        estimator={"name": "mean"},
        rollout={
            "engine": {"kind": "vllm", "max_model_len": max_model_len},
            "sampling": {"max_tokens": max_tokens},
        },
    )
    if accepted:
        assert parse_spec(data).rollout.engine.max_model_len == max_model_len
        return
    with pytest.raises(
        SpecError, match=r"rollout.engine.max_model_len \(\d+\) leaves no room .*rollout.sampling.max_tokens"
    ):
        parse_spec(data)


def test_turn_segments_keep_every_turn_a_state_unless_capped():
    """BabyAI's up-to-100 turns are 100 states of a turn-rule critic, not 16 merged ones."""
    frozen = parse_spec(spec(estimator={"name": "lvrl"}, critic={"kind": "frozen_llm"}))
    assert frozen.critic.segments.rule == "turn" and frozen.critic.segments.max_segments is None
    generative = parse_spec(
        spec(critic={"kind": "generative", "segments": {"rule": "turn"}}, estimator={"name": "value"})
    )
    assert generative.critic.segments.max_segments is None
    sentences = parse_spec(spec(critic={"kind": "generative"}, estimator={"name": "value"}))
    assert sentences.critic.segments.rule == "sentence" and sentences.critic.segments.max_segments == 16
