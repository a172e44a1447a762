"""Stop strings and stop tokens (docs/vllm-wire-spec.md §2.4 steps 3 and 5; vLLM's test_derender_stop cases)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.stop import StopStringMatcher, cut_at_stop_string, drop_stop_token, find_stop, normalize_stop

SMALL = st.text(alphabet="abc \n", max_size=4)


def stream(pieces: list[str], stop: list[str], include: bool, countable_from: int = 0):
    m = StopStringMatcher(stop, include)
    out = []
    for i, p in enumerate(pieces):
        out.append(m.feed(p, countable=i >= countable_from))
        # the held tail is never longer than needed
        assert len(m.held) < max(len(s) for s in stop)
        if m.matched is not None:
            break
    out.append(m.flush())
    return "".join(out), m.matched


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(SMALL, max_size=12), stop=st.lists(st.text(alphabet="abc \n", min_size=1, max_size=4),
                                                        min_size=1, max_size=3),
       include=st.booleans(), min_pieces=st.integers(0, 4))
def test_streaming_equals_one_shot(pieces, stop, include, min_pieces):
    """Any split of the text gives vLLM's one-shot answer (head = the first min_tokens' text)."""
    head = "".join(pieces[:min_pieces])
    text = "".join(pieces)
    expected_text, expected_stop = cut_at_stop_string(text, len(text) - len(head), stop, include)
    # per-piece engine semantics: the earliest completing match after the head
    got_text, got_stop = stream(pieces, stop, include, countable_from=min_pieces)
    if expected_stop is None:
        assert (got_text, got_stop) == (text, None)
    else:
        assert (got_text, got_stop) == (expected_text, expected_stop)
        # one character per piece: the same answer
        assert stream(list(text), stop, include, countable_from=len(head)) == (expected_text, expected_stop)


def test_vllm_stop_string_cases():
    # test_derender_stop: stop "three" cuts "one two three" to "one two "
    assert cut_at_stop_string("one two three", 13, ["three"], False) == ("one two ", "three")
    assert cut_at_stop_string("one two three", 13, ["three"], True) == ("one two three", "three")
    assert stream(["one", " two", " th", "ree", " four"], ["three"], False) == ("one two ", "three")
    assert stream(["one", " two", " th", "ree", " four"], ["three"], True) == ("one two three", "three")


def test_earliest_completion_wins_and_ties_by_order():
    assert find_stop("xxabcd", 6, ["bcd", "ab"]) == ("ab", 2)
    assert find_stop("xxabcd", 6, ["abcd", "bcd"]) == ("abcd", 2)  # same end: list order
    assert find_stop("xxabcd", 6, ["bcd", "abcd"]) == ("bcd", 3)


def test_hold_back_is_minimal():
    m = StopStringMatcher(["STOP"])
    assert m.feed("hello S") == "hello "
    assert m.held == "S"
    assert m.feed("T") == ""
    assert m.feed("x") == "STx"  # "STx" can no longer start "STOP"
    assert m.feed("ST") == ""
    assert m.feed("OP and more") == ""
    assert m.matched == "STOP"
    assert m.feed("ignored") == "" and m.flush() == ""


def test_min_tokens_region_cannot_end_a_match():
    m = StopStringMatcher(["ab"])
    assert m.feed("xab", countable=False) == "xab"  # "ab" may not end in min_tokens text
    assert m.matched is None
    assert m.feed("c") == "c"
    assert m.flush() == ""
    # a match may start in the min_tokens text and end after it
    m = StopStringMatcher(["ab"])
    assert m.feed("xa", countable=False) == "x"
    assert m.feed("b") == ""
    assert m.matched == "ab"


def test_state_round_trip_and_validation():
    m = StopStringMatcher(["STOP"])
    m.feed("abc ST")
    m2 = StopStringMatcher.from_state(["STOP"], False, m.to_state())
    assert m2.feed("OP") == "" and m2.matched == "STOP"
    for bad in [None, [1, None], ["x" * 10, None], ["", "OTHER"], ["", None, 1]]:
        with pytest.raises(ValueError):
            StopStringMatcher.from_state(["STOP"], False, bad)


def test_no_stop_strings_passes_through():
    m = StopStringMatcher([])
    assert m.feed("anything") == "anything" and m.flush() == ""


def test_normalize_stop():
    assert normalize_stop(None) == [] and normalize_stop("") == []
    assert normalize_stop("x") == ["x"] and normalize_stop(["a", "", "b"]) == ["a", "b"]


EOS, EXTRA_EOS = 151645, 151643


@pytest.mark.parametrize("ids,finish,reason,kw,expected", [
    ([1, 2, 3], "stop", 3, {}, ([1, 2], 3)),                      # int reason names the token
    ([1, 2, 3], "stop", 9, {}, ([1, 2, 3], 9)),                   # ...only when it is the last id
    ([1, 2, 3], "length", None, {}, ([1, 2, 3], None)),           # length keeps the token
    ([1, 2, EOS], "stop", None, {}, ([1, 2], None)),              # primary EOS: reason stays null
    ([1, 2, EXTRA_EOS], "stop", None, {}, ([1, 2], EXTRA_EOS)),   # generation-config EOS
    ([1, 2, 7], "stop", None, {"stop_token_ids": [7]}, ([1, 2], 7)),
    ([1, 2, EOS], "stop", None, {"ignore_eos": True}, ([1, 2, EOS], None)),
    ([1, 2, 3], "stop", 3, {"include_stop_str_in_output": True}, ([1, 2, 3], 3)),
    ([1, 2, 3], "stop", "three", {}, ([1, 2, 3], "three")),       # string reason: no token dropped
    ([], "stop", None, {}, ([], None)),
])
def test_drop_stop_token(ids, finish, reason, kw, expected):
    got_ids, got_reason = drop_stop_token(ids, finish, reason, primary_eos_id=EOS, eos_ids=[EOS, EXTRA_EOS], **kw)
    assert (list(got_ids), got_reason) == expected
