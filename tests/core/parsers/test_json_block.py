"""phi4_mini_json, internlm and jamba (tools) against vLLM 0.33's parsers of those names.

Goldens: tests/core/parsers/golden_frontier/<family>.json (tests/oracle/record_json_block.py,
in-process; Qwen3's tokenizer, with InternLM's / Jamba's markers as special tokens: the `qwen3`,
`internlm`, `jamba` fixtures). The non-streaming answers and finish_reason equal vLLM's (where
vLLM's internlm raises, ours is the output as content; phi4_mini_json keeps the text before its
block as the content, a vLLM bug we do not follow: `golden_checks.text_before_block_kept`); any chunking aggregates to them but for
the documented cases (state through orjson between chunks, bounded); the render-side adjustments
equal vLLM's; adversarial text never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.golden_checks import (
    adjusted_request,
    flat,
    nonstream_message,
    per_token_run,
    streamed_messages,
    text_before_block_kept,
)
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.json_block_cases import FAMILIES, INTERNLM_RAISES, TOOLS, S, W

FIXTURE = {"phi4_mini_json": "qwen3", "internlm": "internlm", "jamba": "jamba"}
GOLDEN_DIR = Path(__file__).parent / "golden_frontier"
GOLDENS = {f: json.loads((GOLDEN_DIR / f"{f}.json").read_text(encoding="utf-8"))
           for f in FAMILIES if (GOLDEN_DIR / f"{f}.json").exists()}
RECORDS = [(f, r) for f, g in GOLDENS.items() for r in g["records"]]
IDS = [f"{f}:{r['case']['name']}" for f, r in RECORDS]
START = {"phi4_mini_json": "functools[", "internlm": "<|action_start|><|plugin|>", "jamba": "<tool_calls>"}


def _auto(case) -> bool:
    return bool(case["request"].get("tools")) and case["request"].get("tool_choice", "auto") == "auto"


def test_every_output_is_recorded():
    for family, golden in GOLDENS.items():
        assert set(FAMILIES[family]) <= {r["case"]["name"].split("__")[0] for r in golden["records"]}


@pytest.mark.parametrize(("family", "record"), RECORDS, ids=IDS)
def test_the_tokenizer_is_the_recorded_one(request, family, record):
    assert request.getfixturevalue(FIXTURE[family]).tokenizer.encode(record["case"]["text"]) == record["text_ids"]


@pytest.mark.parametrize(("family", "record"), RECORDS, ids=IDS)
def test_nonstream_equals_vllm(request, family, record):
    model = request.getfixturevalue(FIXTURE[family])
    got = nonstream_message(model, record)
    if "vllm_raises" in record:  # vLLM's server answers an error; ours is the output as content
        assert record["case"]["name"].split("__")[0] in INTERNLM_RAISES
        assert got == ({"reasoning": None, "content": record["case"]["text"], "tool_calls": []},
                       record["engine_finish_reason"])
        return
    message, finish_reason = got
    if family == "phi4_mini_json" and message != record["message"]:
        assert text_before_block_kept(record["case"]["text"], START[family], message, record["message"])
        message = record["message"]
    assert (message, finish_reason) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize(("family", "record"), RECORDS, ids=IDS)
def test_any_chunking_aggregates_to_the_nonstream_answer(request, family, record):
    model = request.getfixturevalue(FIXTURE[family])
    case = record["case"]
    expected, _ = nonstream_message(model, record)
    if not record["text_ids"]:
        return  # (nothing to stream)
    for got, finish_reason in streamed_messages(model, record, expected):
        if family == "internlm" and _auto(case) and case["name"] == "two_calls__auto":
            assert got["tool_calls"]  # a second block after a call went out: vLLM raises
            continue
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == record.get("finish_reason", "stop") or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", [f"{f}:{n}" for f, g in GOLDENS.items() for n in sorted(g["adjusted"])])
def test_render_side_adjustments_equal_vllm(request, name):
    family, key = name.split(":", 1)
    got, want = adjusted_request(request.getfixturevalue(FIXTURE[family]), GOLDENS[family]["adjusted"][key])
    assert got == want


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = {
    "phi4_mini_json": ["functools[", "functools", "functools[]", "[", "]", "{", "}", S, W, '{"name": "search", ',
                       '"parameters": {"q": [1]}}', ", ", "x"],
    "internlm": ["<|action_start|><|plugin|>", "<|action_start|>", "<|plugin|>", "<|action_end|>", "{", "}", S, W,
                 '{"name": "search", ', '"parameters": {"q": 1}}', "x"],
    "jamba": ["<tool_calls>", "</tool_calls>", f"[{S}]", f"[{W}, {S}]", "[", "]", "{", "}", S, "[]", '""', "x"],
}
COMMON = ['"', "\\", "\n", " ", "Paris", "天气", "😀", "<|im_end|>", "<", "NaN"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), family=st.sampled_from(sorted(GOLDENS)), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none"]))  # (forced choices take the shared JSON path, not the family)
def test_adversarial_text_streams_to_the_nonstream_answer(request, data, family, seed, choice):
    model = request.getfixturevalue(FIXTURE[family])
    text = "".join(data.draw(st.lists(st.sampled_from(PIECES[family] + COMMON), max_size=30)))
    tok = model.tokenizer
    ids = tok.encode(text)
    req = {"tools": TOOLS, **({"tool_choice": choice} if choice else {})}
    _, content, calls = make_parser(model, None, family, req).parse_complete(tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(model, None, family, req), chunk_texts(model, ids, cuts), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    got_calls = [(c["name"], c["arguments"]) for c in agg["tool_calls"]]
    assert got_calls == [(c["function"]["name"], c["function"]["arguments"]) for c in calls] or \
        (family == "internlm" and not calls and got_calls)  # (a second block after a call: vLLM raises)
    if got_calls and not calls:
        return
    assert agg["content"] == (content or "")


@pytest.mark.parametrize("family", sorted(GOLDENS))
def test_state_is_bounded_and_feed_cost_flat(request, family):
    model = request.getfixturevalue(FIXTURE[family])
    body = {"phi4_mini_json": f"functools[{S}]", "internlm": f"<|action_start|><|plugin|>{S}<|action_end|>",
            "jamba": f"<tool_calls>[{S}]</tool_calls>"}[family]
    text = "Answer text with a functools reference. " * 300 + body + " after" * 300
    costs, sizes = per_token_run(make_parser(model, None, family, {"tools": TOOLS}), model, text)
    assert max(sizes) < 1000, max(sizes)
    assert flat(costs)


def test_jamba_needs_its_markers_in_the_vocabulary(qwen3):
    """vLLM's jamba parser refuses a tokenizer without `<tool_calls>` / `</tool_calls>`; so does ours."""
    with pytest.raises(ValueError, match="could not locate tool calls start/end tokens"):
        make_parser(qwen3, None, "jamba", {"tools": TOOLS})
