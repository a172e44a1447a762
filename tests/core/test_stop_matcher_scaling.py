"""The stop-string matcher against a naive reference, on both of its paths.

`StopStringMatcher` walks an Aho-Corasick automaton (`StopAutomaton`) for large stop lists and
searches each string with `str.find` for small ones. Whatever the path, the answer must be the
one the rule gives (docs/vllm-wire-spec.md §2.4 step 5): at every token boundary, look at every stop string; the
match that completes earliest in the new text wins, ties go to the earlier entry of `stop`; a
match cannot end in the first `min_tokens` tokens' text. The reference below does exactly that,
one character position at a time, with nothing incremental in it. Performance is measured in
bench/stop.py, not here.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.stop import StopAutomaton, StopStringMatcher, automaton_for, uses_automaton


def naive_stream(pieces: list[str], stop: list[str], include: bool, min_tokens: int) -> tuple[str, str | None]:
    """(output text, matched stop string) from checking all stop strings at each piece boundary."""
    text = ""
    for i, piece in enumerate(pieces):
        before = len(text)
        text += piece
        if i < min_tokens:
            continue
        for end in range(before + 1, len(text) + 1):  # earliest completion first
            for s in stop:  # then list order
                if text.endswith(s, 0, end):
                    return (text[:end] if include else text[:end - len(s)]), s
    return text, None


def proper_prefix_suffix(text: str, stop: list[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
    return max((k for s in stop for k in range(len(s)) if k <= len(text) and text.endswith(s[:k])), default=0)


def run(pieces: list[str], stop: list[str], include: bool, min_tokens: int, *, automaton: bool,
        round_trip: bool = False) -> tuple[str, str | None]:
    m = StopStringMatcher(stop, include, automaton=automaton)
    out = []
    fed = ""
    for i, piece in enumerate(pieces):
        if round_trip:  # what the stateless /derender stream does between chunks
            state = json.loads(json.dumps(m.to_state()))
            m = StopStringMatcher.from_state(stop, include, state, automaton=automaton)
        released = m.feed(piece, countable=i >= min_tokens)
        out.append(released)
        fed += piece
        if m.matched is not None:
            assert m.held == ""
            break
        # only the minimal tail is held back
        assert m.held == fed[len(fed) - proper_prefix_suffix(fed, stop):]
        if not include:
            assert "".join(out) + m.held == fed
    out.append(m.flush())
    return "".join(out), m.matched


# small alphabets make overlaps, shared prefixes and suffix relations frequent; the unicode
# letters include astral and combining characters (str indexes code points, as vLLM's does)
ALPHABET = st.sampled_from(["ab", "abc", "ab\n", "aé😀\u0301"])


@st.composite
def cases(draw):
    alphabet = draw(ALPHABET)
    stop = draw(st.lists(st.text(alphabet, min_size=1, max_size=7), min_size=1, max_size=12))
    if draw(st.booleans()):  # prefixes and suffixes of each other
        base = draw(st.sampled_from(stop))
        cut = draw(st.integers(1, len(base)))
        stop.append(base[:cut] if draw(st.booleans()) else base[len(base) - cut:])
        stop = draw(st.permutations(stop))
    pieces = draw(st.lists(st.text(alphabet, max_size=5), max_size=14))
    return list(stop), pieces, draw(st.booleans()), draw(st.integers(0, 5))


@settings(max_examples=400, deadline=None)
@given(case=cases())
def test_both_paths_equal_the_naive_reference(case):
    stop, pieces, include, min_tokens = case
    expected = naive_stream(pieces, stop, include, min_tokens)
    assert run(pieces, stop, include, min_tokens, automaton=True) == expected
    assert run(pieces, stop, include, min_tokens, automaton=False) == expected


@settings(max_examples=200, deadline=None)
@given(case=cases())
def test_state_round_trip_at_every_chunk_boundary(case):
    stop, pieces, include, min_tokens = case
    expected = naive_stream(pieces, stop, include, min_tokens)
    assert run(pieces, stop, include, min_tokens, automaton=True, round_trip=True) == expected
    assert run(pieces, stop, include, min_tokens, automaton=False, round_trip=True) == expected


@settings(max_examples=100, deadline=None)
@given(case=cases(), data=st.data())
def test_states_move_between_paths(case, data):
    """Both paths hold the same text, so a state written by one is read by the other."""
    stop, pieces, include, min_tokens = case
    m = StopStringMatcher(stop, include, automaton=data.draw(st.booleans()))
    out = []
    for i, piece in enumerate(pieces):
        m = StopStringMatcher.from_state(stop, include, m.to_state(), automaton=data.draw(st.booleans()))
        out.append(m.feed(piece, countable=i >= min_tokens))
        if m.matched is not None:
            break
    out.append(m.flush())
    assert ("".join(out), m.matched) == naive_stream(pieces, stop, include, min_tokens)


def test_long_lists_take_the_automaton_and_match_like_the_reference():
    stop = [f"<stop {i:04d} " + "x" * (i % 50) + ">" for i in range(1000)]
    assert uses_automaton(stop) and not uses_automaton(["</s>", "\n\n"])
    text = "some text <stop 0999 " + "x" * 49 + "> <stop 0007 xxxxxxx> tail"
    pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
    expected = naive_stream(pieces, stop, False, 0)
    assert expected == ("some text ", stop[999])
    assert run(pieces, stop, False, 0, automaton=True) == expected
    assert run(pieces, stop, False, 3, automaton=True) == naive_stream(pieces, stop, False, 3)


def test_automaton_is_cached_per_stop_list():
    stop = [f"s{i}" for i in range(50)]
    assert automaton_for(stop) is automaton_for(list(stop))
    assert automaton_for(stop) is not automaton_for(stop[::-1])  # order is the tie-break


def test_automaton_structure_on_prefix_chains():
    a = StopAutomaton(["abc", "ab", "b", "abd", "ab"])
    # nodes: root, a, ab, abc, abd, b -> preorder of the sorted distinct strings
    assert a.size == 6
    assert [a.node_of(p) for p in ["", "a", "ab", "abc", "abd", "b", "c", "abx"]] == [0, 1, 2, 3, 4, 5, -1, -1]
    assert [a.depth(v) for v in range(6)] == [0, 1, 2, 3, 3, 1]
    assert a.leaves == {3, 4, 5}
    for v in range(6):
        a.resolve(v)
    # "ab" ends at node 2 and, through the failure link, "b" too: the earlier entry ("ab", 1) wins
    assert list(a.out) == [-1, -1, 1, 0, 3, 2]
    assert list(a.fail) == [0, 0, 5, 0, 0, 0]


def test_min_tokens_text_may_start_a_match_on_the_automaton():
    stop = ["ab"] + [f"zz{i}" for i in range(20)]
    m = StopStringMatcher(stop, automaton=True)
    assert m.feed("xab", countable=False) == "xab" and m.matched is None
    m = StopStringMatcher(stop, automaton=True)
    assert m.feed("xa", countable=False) == "x"
    assert m.feed("b") == "" and m.matched == "ab"


@pytest.mark.parametrize("automaton", [True, False])
def test_from_state_rejects_text_no_matcher_would_hold(automaton):
    stop = ["STOP", "halt"]
    for bad in [["xST", None], ["STOP", None], ["ST", "STOP"]]:
        with pytest.raises(ValueError):
            StopStringMatcher.from_state(stop, False, bad, automaton=automaton)
    assert StopStringMatcher.from_state(stop, False, ["STO", None], automaton=automaton).feed("P") == ""


def test_empty_stop_strings_stay_on_the_find_path():
    assert not uses_automaton(["a"] * 10 + [""])
    with pytest.raises(ValueError):
        StopAutomaton(["a", ""])


def test_cache_stays_within_its_node_budget(monkeypatch):
    import core.stop as stop_module
    monkeypatch.setattr(stop_module, "AUTOMATON_CACHE_NODES", 100)
    lists = [[f"{i}-{j}-abcdefgh" for j in range(3)] for i in range(10)]  # 30-ish nodes each
    built = [automaton_for(stop) for stop in lists]
    assert stop_module._automata_nodes <= 100
    assert automaton_for(lists[-1]) is built[-1]  # the most recent stay
    assert automaton_for(lists[0]) is not built[0]  # the oldest were evicted
    oversized = [f"{i}" * 60 for i in range(5)]
    assert automaton_for(oversized) is not automaton_for(oversized)  # larger than the budget: not kept


WORDS = ["alpha", " beta", " gamma", " delta", "世界", " 🎉", "\n\n", " done", "!", " e", "ps"]


@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=25), data=st.data())
def test_choice_decoder_on_a_large_stop_list_equals_the_small_one(qwen3, words, data):
    """Through the real caller (TextDecoder, Qwen3 tokenizer, state round trips per chunk):
    a 300-string list whose only reachable strings are a few (mostly spanning tokens), walked
    by the automaton, cuts exactly where the find path cuts the few, and where the
    non-streaming cut does."""
    import json as _json

    from core.derender.text import TextDecoder, TextOptions, decode_complete

    reachable = data.draw(st.lists(st.sampled_from(["a be", "a de", "界 🎉", "\n\n e", "ps a", "done!", "beta"]),
                                   min_size=1, max_size=3, unique=True))
    big = [f"<never {i}>" for i in range(300)]
    big[data.draw(st.integers(0, 299))] = reachable[0]
    big += reachable[1:]
    include, min_tokens = data.draw(st.booleans()), data.draw(st.integers(0, 3))
    ids = qwen3.tokenizer.encode("".join(words))
    if data.draw(st.booleans()):  # one token per chunk: a state round trip at every token boundary
        cuts = list(range(1, len(ids)))
    else:
        cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=5)))
    chunks = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)])]

    def stream(stop: list[str]) -> tuple[str, object]:
        opts = TextOptions(stop=tuple(stop), include_stop_str_in_output=include, min_tokens=min_tokens)
        decoder, texts, reason = TextDecoder.start(qwen3, opts, None), [], None
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            step = decoder.step(chunk, "length" if last else None, None)
            texts.append(step.text)
            if step.finish_reason is not None:
                reason = step.stop_reason
                break
            decoder = TextDecoder.from_state(qwen3, opts, _json.loads(_json.dumps(decoder.to_state())))
        return "".join(texts), reason

    # the ordering of `big` decides ties, so compare with the reachable strings in that order
    small = [s for s in big if not s.startswith("<never")]
    assert uses_automaton(big) and len(small) <= 3
    got = stream(big)
    assert got == stream(small)
    opts = TextOptions(stop=tuple(big), include_stop_str_in_output=include, min_tokens=min_tokens)
    whole, reason = decode_complete(qwen3, opts, ids, "stop", None, None)
    assert got == (whole, reason if isinstance(reason, str) else None)
