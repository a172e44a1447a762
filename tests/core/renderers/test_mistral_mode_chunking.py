"""`--tokenizer-mode mistral` with the newer tokenizers: any chunking of an output aggregates to the
non-streaming answer from Tekken v11 on, and to the one-chunk stream for SentencePiece v7 (the real
mistral-common tokenizers of tests/mistral_models.py, the real incremental detokenizer for each
chunk's text, the mistral tool and reasoning parsers). The answers themselves are checked against
vLLM in tests/proxy/test_mistral_mode.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.detokenizer import IncrementalDetokenizer
from proxy.model_loader import load_model
from tests.core.parsers.helpers import make_parser, stream
from tests.mistral_models import write_mistral_model

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
TEXTS = ["It is ", "sunny", ".", " ", "\n", "東京", "🗼", "naïve", "get_weather", '{"city": "Paris"}',
         '{"days": 3}', '{"city": "Pa', "}", "<think>", "</think>", "Hmm", "[", "{", '"']
CONTROLS = ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", "[INST]"]
# model, reasoning parser
SETUPS = [("tiny-mistral-v11", None), ("tiny-mistral-v11", "mistral"), ("tiny-mistral-v13", "mistral"),
          ("tiny-mistral-sp", None)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("mistral")
    return {name: load_model(str(write_mistral_model(root / name, name)), tokenizer_mode="mistral")
            for name in {m for m, _ in SETUPS}}


def chunk_texts(model, ids: list[int], cuts: list[int]) -> list[tuple[str, list[int]]]:
    """Each chunk with the text the incremental detokenizer gives for it (special tokens kept, as
    the mistral tool parser asks)."""
    detok = IncrementalDetokenizer.seeded(model.tokenizer, [1, 3], skip_special_tokens=False)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    return [(detok.feed(ids[a:b]), ids[a:b]) for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_chunking_aggregates_to_the_non_streaming_answer(models, data):
    name, reasoning = data.draw(st.sampled_from(SETUPS))
    model = models[name]
    tok = model.tokenizer
    controls = [i for i in (tok.token_to_id(t) for t in CONTROLS) if i is not None]
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(TEXTS), st.sampled_from(controls)), max_size=14))
    ids = [i for p in pieces for i in ([p] if isinstance(p, int) else tok.encode(p))]
    request = data.draw(st.sampled_from([{}, {"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "none"}]))
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=max(1, len(ids))), max_size=8))
    got = stream(make_parser(model, reasoning, "mistral", request), chunk_texts(model, ids, cuts), [1, 3])
    got_calls = [(c["name"], c["arguments"]) for c in got["tool_calls"]]
    whole = chunk_texts(model, ids, [])
    if tok.supports_grammar:  # v11+: vLLM's parser engine, whose streams equal its non-streaming answer
        reasoning_text, content, calls = make_parser(model, reasoning, "mistral", request).parse_complete(
            "".join(t for t, _ in whole), ids, [1, 3])
        expected = (reasoning_text or None, content or None,
                    [(c["function"]["name"], c["function"]["arguments"]) for c in calls])
    else:  # pre-v11 (SentencePiece v7): vLLM's legacy reader reads a malformed output differently when
        # not streaming (test_mistral_mode's STREAM_CANNOT_MATCH): one chunk or many, the same stream
        one = stream(make_parser(model, reasoning, "mistral", request), whole, [1, 3])
        expected = (one["reasoning"] or None, one["content"] or None,
                    [(c["name"], c["arguments"]) for c in one["tool_calls"]])
    answer = (got["reasoning"] or None, got["content"] or None, got_calls)
    assert answer == expected, ids
