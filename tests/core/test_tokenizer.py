"""Our tokenizer wrapper against transformers' own fast tokenizer on the same files."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

TEXTS = ["Hello world", " leading space", "日本語とemoji 🎉", "<|im_end|> <think>x</think>",
         "<|eot_id|><|reserved_special_token_5|> tail"]


@pytest.fixture(scope="module", params=["qwen3", "llama3"])
def pair(request, model_dirs):
    from proxy.model_loader import load_tokenizer
    return load_tokenizer(model_dirs[request.param]), AutoTokenizer.from_pretrained(str(model_dirs[request.param]))


def test_special_ids_are_transformers_all_special_ids(pair):
    ours, theirs = pair
    assert ours.all_special_ids == frozenset(theirs.all_special_ids)
    assert ours.eos_token_id == theirs.eos_token_id
    assert ours.bos_token_id == theirs.bos_token_id


@pytest.mark.parametrize("text", TEXTS)
def test_encode_and_tokens_match_transformers(pair, text):
    ours, theirs = pair
    for special in (False, True):
        ids = ours.encode(text, add_special_tokens=special)
        assert ids == theirs.encode(text, add_special_tokens=special)
    ids = ours.encode(text)
    assert ours.convert_ids_to_tokens(ids, skip_special_tokens=True) == \
        theirs.convert_ids_to_tokens(ids, skip_special_tokens=True)
    tokens = theirs.convert_ids_to_tokens(ids)
    assert ours.convert_tokens_to_string(tokens) == theirs.convert_tokens_to_string(tokens)
    assert len(ours) == len(theirs)
