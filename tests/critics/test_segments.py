"""Segment-level MDP: where responses are cut into segments, and per-token values from them."""

import numpy as np
import pytest

from lecritique.critics.segments import expand_segment_values, segment_index, segment_starts


def chars(text, eos=True):
    """One token per character, plus an EOS token decoding to ""."""
    return [*text, ""] if eos else list(text)


def starts(text, rule, **kw):
    tokens = chars(text)
    n = len(tokens)
    return segment_starts(tokens, np.ones(n, bool), np.zeros(n, int), rule, **kw).tolist()


def test_sentence_rule_splits_after_stops_followed_by_whitespace():
    text = "It is 4. Yes! Done? ok"
    assert starts(text, "sentence") == [0, text.index(" Yes"), text.index(" Done"), text.index(" ok")]


def test_sentence_rule_keeps_decimals_and_final_stop_together():
    text = "Pi is 3.14 roughly."
    # "3.14" has no whitespace after the stop; the final stop is followed by EOS, which never
    # opens a segment of its own.
    assert starts(text, "sentence") == [0]


def test_line_rule_splits_after_newlines_only():
    text = "r1c2=3\nr2c1=4. x\nend"
    assert starts(text, "line") == [0, text.index("r2c1"), text.index("end")]
    assert starts(text, "sentence") == [0, text.index("r2c1"), text.index(" x"), text.index("end")]


def test_turn_rule_and_observations():
    # Two turns: action 0 ("ab."), observation tokens (mask False), action 1 ("cd").
    tokens = ["a", "b", ".", "", "\n", "g", "c", "d", ""]
    mask = np.array([1, 1, 1, 1, 0, 0, 1, 1, 1], bool)
    steps = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    assert segment_starts(tokens, mask, steps, "turn").tolist() == [0, 6]
    # Observations never start a segment, and every turn starts one under every rule.
    assert segment_starts(tokens, mask, steps, "line").tolist() == [0, 6]


def test_no_policy_tokens_means_no_states():
    assert segment_starts(["x", "y"], np.zeros(2, bool), np.zeros(2, int), "sentence").size == 0


def test_max_segments_keeps_evenly_spaced_starts_including_the_first():
    text = "a. b. c. d. e. f. g. h."
    every = starts(text, "sentence")
    assert len(every) == 8
    capped = starts(text, "sentence", max_segments=3)
    assert capped == [every[0], every[4], every[7]]


def test_values_are_constant_within_a_segment():
    values = expand_segment_values([0, 3, 7], [0.2, 0.5, 0.9], 10)
    assert values.tolist() == pytest.approx([0.2] * 3 + [0.5] * 4 + [0.9] * 3)
    assert segment_index([2, 5], 7).tolist() == [0, 0, 0, 0, 0, 1, 1]
    assert expand_segment_values([], [], 3).tolist() == [0.0, 0.0, 0.0]


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="unknown segment rule 'word'"):
        segment_starts(["a"], [True], [0], "word")
    with pytest.raises(ValueError, match="one entry per token"):
        segment_starts(["a", "b"], [True], [0], "line")
    with pytest.raises(ValueError, match="2 values for 1 segments"):
        expand_segment_values([0], [0.1, 0.2], 4)


def test_token_rule_makes_every_policy_token_a_state():
    text = "12+3"
    assert starts(text, "token") == [0, 1, 2, 3]  # the closing EOS ("") opens no state of its own
    tokens = ["a", "b", "", "\n", "c", "d", ""]
    mask = np.array([1, 1, 1, 0, 1, 1, 1], bool)
    steps = np.array([0, 0, 0, 1, 1, 1, 1])
    assert segment_starts(tokens, mask, steps, "token").tolist() == [0, 1, 4, 5]
