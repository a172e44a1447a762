"""olmo3 (reasoning) against vLLM 0.33's Olmo3ReasoningParser.

Goldens: tests/core/parsers/golden_frontier/olmo3.json (tests/oracle/record_olmo3.py, in-process,
on Qwen3's tokenizer without its think tokens: the `olmo3` fixture). The non-streaming answers and
finish_reason equal vLLM's; any chunking aggregates to them but for the documented never-closed
reasoning; `adjust_request` and `is_reasoning_end` equal vLLM's; adversarial text never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.parsers.base import ParserContext
from core.parsers.families.olmo3 import Olmo3ReasoningParser
from tests.core.parsers.golden_checks import adjusted_request, flat, nonstream_message, per_token_run, streamed_messages
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.olmo3_cases import OUTPUTS

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "olmo3.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]


def never_closed(text: str) -> bool:
    """(core/parsers/README.md, "Where streaming cannot equal the non-streaming answer") no
    `</think>`: the stream sent reasoning, the non-streaming answer is all content."""
    return "</think>" not in text


def test_the_tokenizer_is_the_recorded_one(olmo3):
    for record in RECORDS:
        assert olmo3.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    assert set(OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(olmo3, record):
    assert nonstream_message(olmo3, record) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(olmo3, record):
    expected, _ = nonstream_message(olmo3, record)
    for got, finish_reason in streamed_messages(olmo3, record, expected):
        if never_closed(record["case"]["text"]):
            # the same text, sent as reasoning (a leading <think> dropped)
            text = record["case"]["text"]
            assert got["content"] is None and got["reasoning"] == text.removeprefix("<think>")
            continue
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(olmo3, name):
    got, want = adjusted_request(olmo3, GOLDEN["adjusted"][name])
    assert got == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(olmo3, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(olmo3, "olmo3", None, {})
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<think>", "</think>", "<", "</", "<th", "ink>", "think", ">", "/", "r", "c", " ", "\n", "东京", "😀",
          "<|im_end|>", "</think >", "<function_calls>"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16))
def test_adversarial_text_streams_to_the_nonstream_answer(olmo3, pieces, seed):
    tok = olmo3.tokenizer
    ids = tok.encode("".join(pieces))
    text = tok.decode(ids)
    reasoning, content, _ = make_parser(olmo3, "olmo3", None, {}).parse_complete(text, ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(olmo3, "olmo3", None, {}), chunk_texts(olmo3, ids, cuts), None)
    assert agg["max_state"] < 200
    if never_closed(text):
        assert (agg["reasoning"], agg["content"]) == (text.removeprefix("<think>"), "")
    else:
        assert (agg["reasoning"], agg["content"]) == (reasoning or "", content or "")


def test_state_is_bounded_and_feed_cost_flat(olmo3):
    text = "<think>" + "Reasoning about it. " * 400 + "</think>" + "Answer text. " * 400
    costs, sizes = per_token_run(make_parser(olmo3, "olmo3", None, {}), olmo3, text)
    assert max(sizes) < 200, max(sizes)
    assert flat(costs)


def test_a_tokenizer_without_the_pieces_is_refused():
    """vLLM looks the `</think>` pieces up at start-up (a KeyError there): ours refuses too."""

    class NoPieces:
        def token_to_id(self, token: str) -> int | None:
            return {"</": 1, "think": 2}.get(token)

    with pytest.raises(ValueError, match="olmo3 reasoning parser"):
        Olmo3ReasoningParser(ParserContext(tokenizer=NoPieces()))  # type: ignore[arg-type]
