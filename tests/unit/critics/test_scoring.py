"""Parsing the generative critic's verbal score, and GenAC's REINFORCE reward."""

import pytest

from lecritique.critics.scoring import critic_reward, parse_score


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("score:7", 7),
        ("it looks solid, so Score: 10", 10),
        ("score:0 ", 0),
        ("reasoning...\nscore : 4.", 4),
        ("score:3c2=1", 3),
    ],
)
def test_valid_scores_are_normalised_to_the_unit_interval(text, score):
    parsed = parse_score(text)
    assert parsed.ok and parsed.failure is None
    assert parsed.score == score
    assert parsed.value == pytest.approx(score / 10)


@pytest.mark.parametrize(
    ("text", "failure"),
    [
        ("score:11", "out_of_range"),
        ("score:-1", "out_of_range"),
        ("score:100", "out_of_range"),
        ("no verdict at all", "missing"),
        ("score: seven", "missing"),
        ("", "missing"),
        ("score:3 ... no wait, score:8", "multiple"),
        ("score:5 score:5", "multiple"),
        ("score:7.5", "not_integer"),
    ],
)
def test_bad_scores_are_counted_failures_not_errors(text, failure):
    parsed = parse_score(text)
    assert not parsed.ok
    assert parsed.value is None and parsed.score is None
    assert parsed.failure == failure


def test_custom_tag_and_scale():
    assert parse_score("value=3", tag="value=", max_score=4).value == pytest.approx(0.75)
    assert parse_score("score:3", tag="value=").failure == "missing"
    with pytest.raises(ValueError, match="max_score"):
        parse_score("score:1", max_score=0)


def test_reinforce_reward_is_one_minus_squared_error_and_zero_on_failure():
    assert critic_reward(parse_score("score:7"), 1.0) == pytest.approx(1 - 0.3**2)
    assert critic_reward(parse_score("score:7"), 0.0) == pytest.approx(1 - 0.7**2)
    assert critic_reward(parse_score("score:10"), 1.0) == 1.0
    assert critic_reward(parse_score("score:0"), 1.0) == 0.0
    # A wrong but parseable score still earns more than no score: the format is rewarded.
    assert critic_reward(parse_score("score:5"), 1.0) > critic_reward(parse_score("score 5"), 1.0) == 0.0
