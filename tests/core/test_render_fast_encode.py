"""core.fast_encode gives exactly the Rust tokenizer's ids, on real Qwen3 and Llama-3 tokenizers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.fast_encode import FastEncoder, ascii_pattern, has_unassigned
from tests.metaspace import mistral_v1_tokenizer

SPECIALS = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "<|begin_of_text|>",
            "<|eot_id|>", "<|start_header_id|>", "<|im_start", "|>", "<"]
PIECES = st.one_of(
    st.text(max_size=12),  # any Unicode, including unassigned code points (Rust path)
    st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "M", "Cc")), max_size=12),
    st.sampled_from(SPECIALS),
    st.sampled_from([" ", "  ", "\n", "\n\n", "\r\n", "\t", " \n ", "\u3000", "\u00a0", "'s", "'LL", "123456",
                     "你好，世界", "🎉👩‍👩‍👧", "e\u0301", "Ａｂ", "\u2028", "\x0b\x0c", "\ufeff"]),
)


@pytest.fixture(scope="module", params=["qwen3", "llama3"])
def tokenizer(request):
    return request.getfixturevalue(request.param).tokenizer


@pytest.fixture(scope="module")
def encoder(tokenizer):
    fast = FastEncoder.build(tokenizer.backend)
    assert fast is not None, "Qwen3 and Llama-3 pipelines are supported"
    return fast


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(PIECES, max_size=25))
def test_random_text_matches_rust(encoder, tokenizer, pieces):
    text = "".join(pieces)
    assert encoder.encode(text) == tokenizer.backend.encode(text, add_special_tokens=False).ids


def test_code_point_sweep(encoder, tokenizer):
    # every 13th code point in the contexts the split regex distinguishes (the full sweep
    # of all 1.1M code points was run once by hand: identical)
    cps = [c for c in range(0, 0x30000, 13) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(cps), 6000):
        text = "".join(f"x{chr(c)} {chr(c)}{chr(c)}\n{chr(c)}1 " for c in cps[start:start + 6000])
        assert encoder.encode(text) == tokenizer.backend.encode(text, add_special_tokens=False).ids


def test_cache_is_exact_when_warm(encoder, tokenizer):
    text = "The same words again and again, with <|im_end|> markers. " * 50
    first = encoder.encode(text)
    assert encoder.encode(text) == first == tokenizer.backend.encode(text, add_special_tokens=False).ids


def test_unassigned_code_points_take_the_rust_path(encoder, tokenizer):
    # U+0558 and U+11DE0 are assigned after Unicode 14: `regex` and Oniguruma disagree on them
    text = "abc \u0558\u0558 1\U00011de0\U00011de1 def"
    assert has_unassigned(text) and not has_unassigned("plain 你好 🎉")
    assert encoder.encode(text) == tokenizer.backend.encode(text, add_special_tokens=False).ids


def test_ascii_translation():
    assert ascii_pattern(r"\p{L}+|[^\s\p{N}]|\s+(?!\S)") == (
        r"[A-Za-z]+|[^\t\n\x0b\x0c\r 0-9]|[\t\n\x0b\x0c\r ]+(?![^\t\n\x0b\x0c\r ])")
    assert ascii_pattern(r"\P{L}") is None and ascii_pattern(r"[^\S]") is None


def test_unsupported_pipeline_is_refused():
    # SentencePiece/Metaspace: not a byte-level split pipeline, so render keeps the Rust encoder
    assert FastEncoder.build(mistral_v1_tokenizer().backend) is None


MIXED = st.lists(st.sampled_from([" ", "  ", "a", "Ab", "xyz", "1", "12345", ",", ".", "!?", "é", "ü", "你", "好",
                                  "🎉", "\u3000", "\u00a0", "\u2009", "\n", "\r\n", "\t", "'s", "'T", "e\u0301",
                                  "\u0301", "-", "$", "<|im_end|>", "´"]), max_size=60)


@settings(max_examples=300, deadline=None)
@given(pieces=MIXED)
def test_ascii_and_unicode_runs_cut_exactly(encoder, tokenizer, pieces):
    # dense mixes of ASCII words, spaces and non-ASCII characters: the cut points between the
    # ASCII (`re`) and Unicode (`regex`) runs must not change a single id
    text = "".join(pieces)
    assert encoder.encode(text) == tokenizer.backend.encode(text, add_special_tokens=False).ids


LONG = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Z", "Cc")), min_size=70,
               max_size=700)


@settings(max_examples=40, deadline=None)
@given(segments=st.lists(LONG, min_size=1, max_size=4), special=st.sampled_from(["<|im_end|>", "<|eot_id|>", "<think>"]))
def test_segment_cache_is_exact(encoder, tokenizer, segments, special):
    # long segments between added tokens are cached; reused in another order and another
    # neighbourhood they still give the Rust ids
    text = special.join(segments)
    reordered = special.join([*reversed(segments), "tail"])
    for _ in range(2):
        assert encoder.encode(text) == tokenizer.backend.encode(text, add_special_tokens=False).ids
        assert encoder.encode(reordered) == tokenizer.backend.encode(reordered, add_special_tokens=False).ids


def test_multi_turn_chat_reuses_earlier_turns(qwen3):
    # a conversation re-sent each turn: every earlier turn is a cache hit, ids stay exact
    from core.protocol.chat import ChatCompletionRequest
    from core.render import RenderOptions, fast_encoder, render_chat

    encoder = fast_encoder(qwen3.tokenizer)
    messages = [{"role": "system", "content": "You are a careful assistant who explains things well. " * 8}]
    options = RenderOptions()
    for turn in range(4):
        messages.append({"role": "user", "content": f"Question {turn}: why is the sky blue at noon? " * 8})
        request = ChatCompletionRequest.model_validate({"model": "tiny-qwen3", "messages": messages})
        hits = encoder.segments.hits
        ids = render_chat(qwen3, options, request)["token_ids"]
        # the system prompt, the earlier questions and every answer but the newest one
        assert encoder.segments.hits - hits >= 2 * turn
        encoder.segments.clear()  # the same render, every segment encoded afresh
        assert render_chat(qwen3, options, request)["token_ids"] == ids
        messages.append({"role": "assistant", "content": f"Answer {turn}: Rayleigh scattering of sunlight. " * 8})


def test_segment_cache_is_bounded():
    from array import array

    from core.fast_encode import SegmentCache

    cache = SegmentCache(max_chars=1000)
    for i in range(10):
        cache.put(f"{i:03d}" + "x" * 197, array("I", [i]))
    assert cache.chars <= 1000 and len(cache) == 5
    assert cache.get("009" + "x" * 197) == array("I", [9]) and cache.get("000" + "x" * 197) is None
    cache.put("y" * 400, array("I", [1]))  # larger than a quarter of the bound: not kept
    assert cache.get("y" * 400) is None
    assert (cache.hits, cache.misses) == (1, 2)


@pytest.mark.slow  # ~2 s: the text backend's encoder is built first (the K3 replay covers it in the fast loop)
@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(PIECES, max_size=25))
def test_specials_as_text_matches_the_text_backend(qwen3, pieces):
    """The Kimi K3 renderer's text encoding (built once per tokenizer, on Qwen3's as its tests):
    special tokens' text is text, other added tokens still match."""
    from core.renderers.kimi_k3 import text_encoder

    tokenizer = qwen3.tokenizer
    fast = text_encoder(tokenizer)
    assert fast is not None
    text = "".join(pieces)
    assert fast.encode(text) == tokenizer.text_backend.encode(text, add_special_tokens=False).ids
    assert fast.encode("a<think>b<|im_end|>") == [
        *tokenizer.encode("a"), tokenizer.token_to_id("<think>"), *tokenizer.text_backend.encode("b<|im_end|>").ids]
    assert tokenizer.token_to_id("<|im_end|>") not in fast.encode("<|im_end|>")
