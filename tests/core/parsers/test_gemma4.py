"""gemma4 (reasoning, tools) against vLLM 0.33's Gemma 4 parser engine.

Goldens: tests/core/parsers/golden_frontier/gemma4.json (tests/oracle/record_gemma4.py, in-process,
on Qwen3's tokenizer with Gemma 4's control tokens: the `gemma4` fixture). The non-streaming
answers and finish_reason equal vLLM's (but for the start-of-output rewrite decided on the start,
as vLLM's own stream decides it); any chunking of any output aggregates to them (state through
orjson between chunks, bounded); the
render-side adjustments and `is_reasoning_end` on Gemma 4 prompts equal vLLM's; adversarial text
never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.gemma4_cases import CALL, CALL2, OUTPUTS, TOOLS
from tests.core.parsers.golden_checks import (adjusted_request, flat, nonstream_message, per_token_run,
                                              streamed_messages)
from tests.core.parsers.helpers import chunk_texts, make_parser, stream

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "gemma4.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# vLLM's non-streaming answer rewrites the start of the output looking at all of it (a `<channel|>`
# later without any `<|channel>`, a `thought\n` start without a later `<|channel>`); ours decides on
# the start, streaming and not, and is then vLLM's own recorded stream (core/parsers/README.md,
# "vLLM 0.33 bugs we do not follow")
VLLM_BUGS = {"closed_without_start__default", "thought_then_channel__default",
             "tools_only:closed_without_start__default", "reasoning_only:closed_without_start__default"}


def test_the_tokenizer_is_the_recorded_one(gemma4):
    tok = gemma4.tokenizer
    for record in RECORDS:
        assert tok.encode(record["case"]["text"]) == record["text_ids"]
    assert tok.token_to_id("<turn|>") == GOLDEN["eos_token_id"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(gemma4, record):
    got, finish = nonstream_message(gemma4, record)
    if record["case"]["name"] in VLLM_BUGS:
        theirs = {k: v for k, v in record["vllm_stream"].items() if k != "finish_reason"}
        assert got != record["message"] and got == theirs
        return
    assert (got, finish) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(gemma4, record):
    expected, _ = nonstream_message(gemma4, record)
    for got, finish in streamed_messages(gemma4, record, expected):
        assert got == expected
        assert finish == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(gemma4, name):
    got, want = adjusted_request(gemma4, {"reasoning_parser": "gemma4", "tool_parser": "gemma4",
                                          **GOLDEN["adjusted"][name]})
    assert got == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_on_gemma4_prompts_equals_vllm(gemma4, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(gemma4, "gemma4", None, {}, recorded["chat_template_kwargs"])
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


def test_a_prompt_inside_an_open_channel_starts_the_output_in_reasoning(gemma4):
    """vLLM's adjust_initial_state_from_prompt (its stream only; ours, streaming and not), one
    token per chunk and one chunk."""
    tok = gemma4.tokenizer
    ids = tok.encode("Let me see.<channel|>Sunny.")
    for prompt, want in (("<|turn>model\n<|channel>thought\n", ("Let me see.", "Sunny.")),
                         ("<|turn>model\n<|channel>thought\n<channel|>", (None, "Let me see.Sunny.")),
                         (None, (None, "Let me see.Sunny."))):
        prompt_ids = tok.encode(prompt) if prompt else None
        reasoning, content, _ = make_parser(gemma4, "gemma4", "gemma4", {"tools": TOOLS}).parse_complete(
            tok.decode(ids), ids, prompt_ids)
        assert (reasoning, content) == want
        for cuts in ([], list(range(1, len(ids)))):
            parser = make_parser(gemma4, "gemma4", "gemma4", {"tools": TOOLS})
            agg = stream(parser, chunk_texts(gemma4, ids, cuts), prompt_ids)
            assert (agg["reasoning"] or None, agg["content"] or None) == want


@pytest.mark.parametrize("text, want", [("Let me think.<channel|>Answer.", (None, "Let me think.Answer.")),
                                        ("thought\nabc<|channel>x<channel|>y", ("abcx", "y")),
                                        ("<channel|>Answer.<|channel>x", ("x", "Answer.")),
                                        ("thoughtful", (None, "thoughtful")), ("thought", (None, None))])
def test_the_channel_rewrite_is_decided_on_the_start(gemma4, text, want):
    """Streaming and not (vLLM's own stream decides on its first delta), one token per chunk and one chunk."""
    ids = gemma4.tokenizer.encode(text)
    reasoning, content, _ = make_parser(gemma4, "gemma4", "gemma4", {"tools": TOOLS}).parse_complete(text, ids, None)
    assert (reasoning, content) == want
    for cuts in ([], list(range(1, len(ids)))):
        agg = stream(make_parser(gemma4, "gemma4", "gemma4", {"tools": TOOLS}), chunk_texts(gemma4, ids, cuts), None)
        assert (agg["reasoning"] or None, agg["content"] or None) == want


def test_qwen3_tokenizer_is_refused_at_start_up(qwen3):
    from core.parsers.pipeline import ChatOutputParser

    with pytest.raises(ValueError, match="could not locate think start/end tokens"):
        ChatOutputParser.check_supported(qwen3, "gemma4", "gemma4", True)


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<|turn>", "<turn|>",
          "<|tool_response>", "call:", "call", ":", "get_weather", "search", "{", "}", "(", ")", "[", "]", ",",
          "city", "days", "query", "thought", "\n", " ", "Paris", "3", "true", "2.5", "天气", "😀", "<|im_end|>",
          '"', "\\", "x", "."]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=40), seed=st.integers(0, 2**16),
       kw=st.sampled_from([{}, {"enable_thinking": True}]),
       choice=st.sampled_from([None, "auto", "none", "required"]),
       parsers=st.sampled_from([("gemma4", "gemma4"), ("gemma4", None), (None, "gemma4")]))
def test_adversarial_text_streams_to_the_nonstream_answer(gemma4, pieces, seed, kw, choice, parsers):
    text = "".join(pieces)
    ids = gemma4.tokenizer.encode(text)
    request = {"tools": TOOLS, "chat_template_kwargs": kw, **({"tool_choice": choice} if choice else {})}
    parser = make_parser(gemma4, *parsers, request, kw)
    reasoning, content, calls = parser.parse_complete(gemma4.tokenizer.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(gemma4, *parsers, request, kw), chunk_texts(gemma4, ids, cuts), None)
    assert agg["max_state"] < 4096 + 4 * len(text)
    assert agg["reasoning"] == (reasoning or "")
    assert agg["content"] == (content or "")
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_state_is_bounded_and_feed_cost_flat(gemma4):
    """A long output: the state stays the same size whatever was already parsed (through orjson
    at every token), and the last feeds cost what the first did."""
    text = "<|channel>thought\n" + "thinking " * 400 + "<channel|>" + "answer " * 400 + CALL + CALL2
    costs, sizes = per_token_run(make_parser(gemma4, "gemma4", "gemma4", {"tools": TOOLS}), gemma4, text)
    assert max(sizes) < 2048
    assert max(sizes[len(sizes) // 3: 2 * len(sizes) // 3]) < 600  # the plain-text middle: no growth
    assert flat(costs)


def test_every_output_is_recorded():
    names = {r["case"]["name"].split("__")[0] for r in RECORDS}
    assert set(OUTPUTS) <= names


# -- the argument reader against vLLM's own converter (in the oracle's venv) --------------------

ORACLE_PYTHON = Path("/root/vllm-oracle/venv033/bin/python")
_ARGS_DIFF = """
import random, sys
sys.path.insert(0, sys.argv[1])
from vllm.parser.gemma4 import _gemma4_arg_converter
from core.parsers.families.gemma4_args import gemma4_arguments
pieces = ['<|"|>', '{', '}', '[', ']', '(', ')', ',', ':', ' ', '\\n', 'a', 'key', '1', '2.', '.5', 'true', '<|',
          '"|>', 'x y', '\\t', '\\u00e9', '\\U0001f600']
rng, bad = random.Random(0), []
for _ in range(20000):
    s = ''.join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
    if gemma4_arguments(s) != _gemma4_arg_converter(s, False):
        bad.append(s)
print(len(bad), repr(bad[:3]))
"""


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.skipif(not ORACLE_PYTHON.exists(), reason="vLLM 0.33 oracle venv not installed")
def test_arguments_equal_vllm_converter_on_random_text():
    """20000 random argument texts: gemma4_arguments == vLLM's `_gemma4_arg_converter(text, False)`."""
    import subprocess

    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([str(ORACLE_PYTHON), "-c", _ARGS_DIFF, str(root)], capture_output=True, text=True,
                         env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"}, timeout=600, check=True)
    assert out.stdout.startswith("0 "), out.stdout
