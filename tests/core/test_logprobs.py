"""Logprob resolution (docs/vllm-wire-spec.md §2.4 step 9, 2.5): both input shapes, cuts, leading space, U+FFFD repair."""

from __future__ import annotations

import pytest

from core.logprobs import (TokenTexts, chat_top_limit, completion_logprobs, completion_top_limit,
                           context_tail, normalize_content, resolve_chat_logprobs)
from tests.metaspace import mistral_v1_tokenizer


def engine_logprobs(ids: list[int], k: int = 2) -> list[dict]:
    """The 0.33 generate shape: sampled token first in top_logprobs, then others."""
    return [{"token_id": t, "logprob": -0.5 - i, "rank": 1,
             "top_logprobs": [{"token_id": t, "logprob": -0.5 - i, "rank": 1}]
             + [{"token_id": t + j + 1, "logprob": -3.0 - j, "rank": j + 2} for j in range(k)]}
            for i, t in enumerate(ids)]


def legacy_logprobs(ids: list[int], k: int = 2) -> list[dict]:
    return [{"token": f"token_id:{e['token_id']}", "logprob": e["logprob"], "bytes": None,
             "top_logprobs": [{"token": f"token_id:{c['token_id']}", "logprob": c["logprob"], "bytes": None}
                              for c in e["top_logprobs"]]}
            for e in engine_logprobs(ids, k)]


def test_both_shapes_resolve_identically(qwen3):
    tok = qwen3.tokenizer
    ids = tok.encode("Hello, 世界! 🎉")
    texts = TokenTexts.of(tok)
    new = resolve_chat_logprobs(texts, normalize_content(engine_logprobs(ids)), None)
    old = resolve_chat_logprobs(texts, normalize_content(legacy_logprobs(ids)), None)
    assert new == old
    # the sampled tokens' texts concatenate to the text (the last fragment of a split
    # character carries it, earlier fragments are "")
    assert "".join(e["token"] for e in new["content"]) == "Hello, 世界! 🎉"
    for e in new["content"]:
        assert e["bytes"] == list(e["token"].encode())
        assert len(e["top_logprobs"]) == 3
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert list(e) == ["token", "logprob", "bytes", "top_logprobs"]


def test_top_logprobs_cut(qwen3):
    tok = qwen3.tokenizer
    content = normalize_content(engine_logprobs(tok.encode("a b c"), k=4))
    texts = TokenTexts.of(tok)
    assert all(len(e["top_logprobs"]) == 2
               for e in resolve_chat_logprobs(texts, content, 2)["content"])
    assert all(e["top_logprobs"] == [] for e in resolve_chat_logprobs(texts, content, 0)["content"])
    assert resolve_chat_logprobs(texts, None, None) == {"content": None}


@pytest.mark.parametrize("logprobs,top,ids,has,expected", [
    (True, 3, None, True, 3), (True, None, None, True, 0), (True, -1, None, True, None),
    (True, 2, [5], True, None), (False, 3, None, True, None), (None, None, None, False, None)])
def test_chat_limit(logprobs, top, ids, has, expected):
    assert chat_top_limit(logprobs, top, ids, has) == expected


@pytest.mark.parametrize("logprobs,ids,has,expected", [
    (2, None, True, 3), (0, None, True, 1), (-1, None, True, None), (None, None, True, None),
    (2, [1], True, None), (2, None, False, None)])
def test_completion_limit(logprobs, ids, has, expected):
    assert completion_top_limit(logprobs, ids, has) == expected


def test_metaspace_leading_space_restored():
    tok = mistral_v1_tokenizer()
    ids = tok.encode("Hello world")
    assert tok.decode([ids[1]]) == "world"  # the decoder strips it ...
    content = resolve_chat_logprobs(TokenTexts.of(tok), normalize_content(engine_logprobs(ids, 0)), None)
    assert [e["token"] for e in content["content"]] == [" Hello", " world"]  # ... logprobs keep it


def test_byte_fallback_fragment_repaired_with_context():
    tok = mistral_v1_tokenizer()
    ids = tok.encode("a𝕏")  # "▁a" + 4 byte-fallback tokens
    pieces = tok.convert_ids_to_tokens(ids)
    assert [p.startswith("<0x") for p in pieces].count(True) == 4
    texts = TokenTexts.of(tok)
    content = normalize_content(engine_logprobs(ids, 0))
    whole = resolve_chat_logprobs(texts, content, None)["content"]
    assert [e["token"] for e in whole] == [" a", "", "", "", "𝕏"]
    # streaming: the context of earlier chunks is carried (last 4 sampled ids)
    first = resolve_chat_logprobs(texts, content[:3], None)["content"]
    second = resolve_chat_logprobs(texts, content[3:], None, context_tail([], ids[:3]))["content"]
    assert first + second == whole


def test_completion_logprobs_offsets(qwen3):
    tok = qwen3.tokenizer
    ids = tok.encode("one two three")
    raw = engine_logprobs(ids)
    raw[1]["top_logprobs"] = []  # a position without candidates -> null
    content = normalize_content(raw)
    chat = resolve_chat_logprobs(TokenTexts.of(tok), content, 2)
    comp = completion_logprobs(chat, content, text_offset=7)
    assert list(comp) == ["text_offset", "token_logprobs", "tokens", "top_logprobs"]
    assert comp["tokens"] == ["one", " two", " three"]
    assert comp["text_offset"] == [7, 10, 14]
    assert comp["top_logprobs"][1] is None
    assert len(comp["top_logprobs"][0]) == 2
    assert completion_logprobs({"content": None}, None) == {
        "text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}


def test_bad_legacy_token_is_value_error():
    with pytest.raises(ValueError):
        normalize_content([{"token": "hello", "logprob": -1.0}])


def test_unknown_id_resolves_to_empty(qwen3):
    content = normalize_content([{"token_id": 10**8, "logprob": -1.0, "top_logprobs": []}])
    out = resolve_chat_logprobs(TokenTexts.of(qwen3.tokenizer), content, None)
    assert out["content"][0]["token"] == "" and out["content"][0]["bytes"] is None
