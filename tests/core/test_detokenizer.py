"""The incremental detokenizer: vLLM's algorithm (docs/vllm-wire-spec.md §4), chunking-invariant, bounded state.

Real tokenizers: Qwen3 and Llama-3 (byte-level BPE) and Mistral's SentencePiece model
(Metaspace with byte fallback). Three oracles:
* `tokenizer.decode(ids)` for ids that come from real text (what a client expects);
* a literal transcription of docs/vllm-wire-spec.md §4 (unoptimized, untrimmed) for arbitrary ids,
  including special tokens, out-of-vocabulary ids and broken UTF-8;
* our own one-shot decode, for streamed decoding with a serialization round trip between
  every chunk (what the raw streaming endpoint does).
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.detokenizer import IncrementalDetokenizer, detokenize, skip_special_ids
from core.tokenizer import Tokenizer
from tests.metaspace import mistral_v1_tokenizer

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

# text that exercises byte-level merges, multi-byte characters and byte fallback
ALPHABET = st.sampled_from(list(
    "abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?'\"-_\n\t  ")
    + list("你好世界中文測試日本語한국어") + list("éèüßñçøå") + ["🎉", "😀", "👍🏽", "🇫🇷", "𝕏", "∑", "→"])
TEXTS = st.lists(ALPHABET, min_size=1, max_size=60).map("".join)


@pytest.fixture(scope="module")
def tokenizers(qwen3, llama3) -> dict[str, Tokenizer]:
    return {"qwen3": qwen3.tokenizer, "llama3": llama3.tokenizer, "mistral": mistral_v1_tokenizer()}


def reference_detokenize(tok: Tokenizer, ids: list[int], prompt: list[int] | None, skip: bool) -> str:
    """Spec section 4 word for word: token strings, prefix/read offsets, no trimming, no caching."""
    skipped = skip_special_ids(tok) if skip else frozenset()

    def convert(ids):  # transformers' convert_ids_to_tokens(ids, skip_special_tokens=skip)
        return [t if t is not None else "" for t in tok.convert_ids_to_tokens([i for i in ids if i not in skipped])]

    if prompt:
        tokens = convert(prompt[-7:])
    else:
        tokens = []
    read = len(tokens)
    prefix = max(read - 5, 0)
    out = []
    for tid in ids:
        if 0 <= tid < len(tok):
            new = convert([tid])
        else:
            new = [""]
        tokens = tokens + new
        prefix_text = tok.convert_tokens_to_string(tokens[prefix:read])
        new_text = tok.convert_tokens_to_string(tokens[prefix:])
        if len(new_text) <= len(prefix_text) or new_text.endswith("\ufffd"):
            continue
        out.append(new_text[len(prefix_text):])
        prefix, read = read, len(tokens)
    return "".join(out)


def streamed(tok: Tokenizer, ids: list[int], cuts: list[int], prompt: list[int] | None, skip: bool) -> str:
    """Decode chunk by chunk, serializing the state to JSON and back between chunks."""
    detok = IncrementalDetokenizer.seeded(tok, prompt, skip_special_tokens=skip)
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.append(detok.feed(ids[a:b]))
        state = orjson.loads(orjson.dumps(detok.to_state()))
        detok = IncrementalDetokenizer.from_state(tok, state, skip_special_tokens=skip)
    return "".join(out)


@pytest.mark.parametrize("name", ["qwen3", "llama3", "mistral"])
@SETTINGS
@given(text=TEXTS, cuts=st.lists(st.integers(0, 200), max_size=8))
def test_text_roundtrip_any_chunking(tokenizers, name, text, cuts):
    tok = tokenizers[name]
    ids = tok.encode(text)
    expected = tok.decode(ids)
    assert detokenize(tok, ids) == expected
    assert streamed(tok, ids, cuts, None, True) == expected
    # one token per chunk
    assert streamed(tok, ids, list(range(len(ids))), None, True) == expected


@pytest.mark.parametrize("name", ["qwen3", "llama3", "mistral"])
@SETTINGS
@given(data=st.data(), cuts=st.lists(st.integers(0, 200), max_size=8), skip=st.booleans(),
       prompt=st.one_of(st.none(), st.lists(st.integers(0, 40000), max_size=12)))
def test_arbitrary_ids_match_spec_algorithm(tokenizers, name, data, cuts, skip, prompt):
    tok = tokenizers[name]
    special = sorted(tok.all_special_ids | skip_special_ids(tok))
    byte_ids = [i for i in range(min(len(tok), 600)) if (tok.id_to_token(i) or "").startswith("<0x")]
    ids = data.draw(st.lists(st.one_of(
        st.integers(0, len(tok) - 1),
        st.sampled_from(special),
        st.sampled_from(byte_ids or special),
        st.integers(len(tok), len(tok) + 10)), max_size=40))
    expected = reference_detokenize(tok, ids, prompt, skip)
    assert detokenize(tok, ids, prompt_token_ids=prompt, skip_special_tokens=skip) == expected
    assert streamed(tok, ids, cuts, prompt, skip) == expected


@pytest.mark.parametrize("name", ["qwen3", "llama3", "mistral"])
@SETTINGS
@given(prompt=TEXTS, text=TEXTS, cuts=st.lists(st.integers(0, 200), max_size=6))
def test_seeded_decode_matches_spec(tokenizers, name, prompt, text, cuts):
    tok = tokenizers[name]
    prompt_ids = tok.encode(prompt)
    ids = tok.encode(" " + text)
    expected = reference_detokenize(tok, ids, prompt_ids, True)
    assert detokenize(tok, ids, prompt_token_ids=prompt_ids) == expected
    assert streamed(tok, ids, cuts, prompt_ids, True) == expected


def test_metaspace_seed_keeps_leading_space():
    """vLLM's test: seeding from prompt_token_ids adds the leading space; otherwise equal."""
    tok = mistral_v1_tokenizer()
    prompt = tok.encode("[INST] Say hello [/INST]")
    ids = tok.encode("Hello world")  # "▁Hello", "▁world"
    assert tok.id_to_token(ids[0]).startswith("▁")
    assert detokenize(tok, ids) == "Hello world"
    assert detokenize(tok, ids, prompt_token_ids=prompt) == " Hello world"


@pytest.mark.parametrize("name", ["qwen3", "llama3", "mistral"])
def test_partial_characters_are_held_back(tokenizers, name):
    tok = tokenizers[name]
    text = "ok 𝕏🎉你好👍🏽 done"
    ids = tok.encode(text)
    detok = IncrementalDetokenizer(tok)
    pieces = [detok.step(i) for i in ids]
    assert "".join(pieces) == tok.decode(ids)
    assert not any("\ufffd" in p for p in pieces)
    assert any(p == "" for p in pieces)  # something was held back mid-character


def test_llama3_reserved_tokens_are_not_skipped(llama3):
    """transformers' all_special_ids for Llama-3 is {bos, eos}: vLLM keeps reserved tokens' text."""
    tok = llama3.tokenizer
    assert skip_special_ids(tok) == {128000, 128009}
    ids = [128000, 9906, 128002, 1917, 128009]
    assert detokenize(tok, ids, skip_special_tokens=True) == "Hello<|reserved_special_token_0|> world"


def test_special_tokens_skip_and_keep(qwen3):
    tok = qwen3.tokenizer
    ids = tok.encode("<think>\nhm\n</think>\n\nHi<|im_end|>")
    assert detokenize(tok, ids, skip_special_tokens=False) == tok.decode(ids, skip_special_tokens=False)
    assert detokenize(tok, ids, skip_special_tokens=True) == tok.decode(ids, skip_special_tokens=True)
    assert "<|im_end|>" not in detokenize(tok, ids, skip_special_tokens=True)
    assert "<think>" in detokenize(tok, ids, skip_special_tokens=True)  # not a special token


def test_state_is_bounded_and_flat(qwen3):
    tok = qwen3.tokenizer
    ids = tok.encode("The quick brown fox jumps over the lazy dog. 你好世界🎉 " * 400)
    detok = IncrementalDetokenizer.seeded(tok, ids[:50])
    sizes = []
    for i in ids:
        detok.step(i)
        sizes.append(len(orjson.dumps(detok.to_state())))
    assert max(sizes) < 200
    assert detok.window_size <= 32


def test_degenerate_output_stays_bounded(qwen3):
    tok = qwen3.tokenizer
    lone_lead = tok.encode("你")[0]  # 3-byte char: the first byte token alone never completes
    broken = [i for i in range(256) if tok.decode([i]) == "\ufffd"][:1] or [lone_lead]
    detok = IncrementalDetokenizer(tok)
    for _ in range(1000):
        detok.step(broken[0])
    assert detok.window_size <= 64 + 7


@pytest.mark.parametrize("bad", [None, {}, [[], 0], [[1], 2, 1], [[1], -1, 0], [["a"], 0, 1],
                                 [[10**9], 0, 1], [list(range(500)), 0, 1], [[1], True, 1]])
def test_state_validation(qwen3, bad):
    with pytest.raises(ValueError):
        IncrementalDetokenizer.from_state(qwen3.tokenizer, bad)
