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


def test_sentence_rule_splits_after_stops_deciding_from_the_prefix():
    text = "It is 4. Yes! Done? ok"
    # A stop after a letter ends the sentence at once; "4." may be a decimal: the space after it
    # confirms the end, so that segment starts after the space (the decision never reads ahead).
    assert starts(text, "sentence") == [0, text.index(" Yes") + 1, text.index(" Done"), text.index(" ok")]


def test_sentence_rule_keeps_decimals_together_and_eos_opens_a_pending_segment():
    text = "Pi is 3.14 roughly."
    # "3.14": the token after the stop is no whitespace. The final stop ends a sentence before
    # anyone knows an EOS follows, so the EOS is a segment of its own (its state is V(h_EOS)).
    assert starts(text, "sentence") == [0, len(text)]


def test_line_rule_splits_after_newlines_only():
    text = "r1c2=3\nr2c1=4. x\nend"
    assert starts(text, "line") == [0, text.index("r2c1"), text.index("end")]
    assert starts(text, "sentence") == [0, text.index("r2c1"), text.index(" x") + 1, text.index("end")]


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


def test_max_segments_keeps_starts_spaced_by_the_budget_from_the_prefix():
    text = "a. b. c. d. e. f. g. h."
    every = starts(text, "sentence")
    assert every == [0, 2, 5, 8, 11, 14, 17, 20, 23]  # the last one: the EOS after the final stop
    # Budget 24 tokens over 3 segments: a start at least 8 policy tokens after the last kept one.
    assert starts(text, "sentence", max_segments=3, max_length=24) == [0, 8, 17]
    # Without a budget the first max_segments starts are kept and the rest merge into the last.
    assert starts(text, "sentence", max_segments=3) == [0, 2, 5]
    # A trajectory longer than the budget still gets at most max_segments.
    assert len(starts(text * 3, "sentence", max_segments=3, max_length=24)) == 3


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
    assert starts(text, "token") == [0, 1, 2, 3, 4]  # the closing EOS ("") too: it is an action
    tokens = ["a", "b", "", "\n", "c", "d", ""]
    mask = np.array([1, 1, 1, 0, 1, 1, 1], bool)
    steps = np.array([0, 0, 0, 1, 1, 1, 1])
    assert segment_starts(tokens, mask, steps, "token").tolist() == [0, 1, 2, 4, 5, 6]


@pytest.mark.parametrize(
    ("case", "rule", "text", "t", "tail", "options"),
    [
        # main chose max_segments starts evenly spaced over the whole trajectory's starts.
        ("max_segments", "sentence", "a. b. c. d. e. f. g. h.", 12, "zzzzzzzzzzzz", {"max_segments": 3}),
        (
            "max_segments with a budget",
            "sentence",
            "a. b. c. d. e. f. g. h.",
            12,
            "zzzzzzzzzzzz",
            {"max_segments": 3, "max_length": 24},
        ),
        # main opened a segment at t when token t (not t - 1) was whitespace after "4."
        ("sentence lookahead", "sentence", "It is 4. Yes", 8, "5 Yes", {}),
        # main never opened a segment at an EOS: the decision read a_t itself.
        ("eos", "line", "Done.\n", 6, "x", {}),
    ],
)
def test_starts_up_to_t_never_depend_on_tokens_from_t_on(case, rule, text, t, tail, options):
    """Finding 1 of issue 27: which state's value token t inherits is decided from the prefix."""
    original = chars(text)
    changed = original[:t] + chars(tail)
    n, m = len(original), len(changed)
    before = segment_starts(original, np.ones(n, bool), np.zeros(n, int), rule, **options)
    after = segment_starts(changed, np.ones(m, bool), np.zeros(m, int), rule, **options)
    assert before[before <= t].tolist() == after[after <= t].tolist(), case
