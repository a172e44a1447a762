"""Differential fuzz of our own (issue 14): any chunking streams to the non-streaming answer.

Model-like outputs per family (tests/core/parsers/fuzz_cases.py) go through `ChatOutputParser`
the way derender drives it: token ids from the real tokenizer, the text an incremental
detokenizer gives for each chunk, the state round-tripped through orjson between chunks (as in
`stream_state`), then `finish`; chunked as one chunk, one token per chunk, one token per chunk
with the finish alone in an empty last chunk, and at random cuts. The aggregate must equal
`parse_complete`, except where no stream can follow the non-streaming rule (`EXPLAINED`, each
one documented in core/parsers/README.md):

* a call streamed before it turned malformed (cut off, broken JSON, a marker inside a value...):
  what was sent cannot be taken back;
* the engine families (minimax_m2 too) and step3 strip the content when calls are found: its leading whitespace was sent
  before the call appeared;
* llama3_json: prose before the first call (the non-streaming answer drops it once a call is found);
* mistral before v11: text before `[TOOL_CALLS]` when no valid call follows (the answer is then
  the text after the marker);
* granite: text before the thought-process marker, and a thought process never answered while
  the reasoning is returned;
* nemotron_v3 with thinking off or `force_nonempty_content`: a whitespace-only content swapped
  with the reasoning (only the end of the output decides it); granite_thinking_parser the same
  for an absent content;
* phi4_mini_json: the text before the `functools[` block (the non-streaming answer drops it);
* olmo3: an output that never writes `</think>` (all content in the answer, reasoning in the stream);
* ernie45: a `<think>` after text, text before `<response>`, a `<response>` never closed;
* hunyuan_a13b: an output cut off in its reasoning, END in the reasoning only, `<think>` after text;
Reasoning must always be equal, and nothing else may differ. The default run is a few seconds
per family; `slow` runs thousands of cases.
"""

from __future__ import annotations

import random
import re
import sys
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.fuzz_cases import FAMILIES, GRANITE_RESPONSE, GRANITE_THINK, make_case
from tests.core.parsers.helpers import non_streaming_message, prepare_case, streamed_message

# the families that strip the content when calls are found (step3: the classic Step 3 parser too)
ENGINE_TOOLS = {"qwen3_xml", "qwen3_coder", "glm45", "glm47", "kimi_k2", "mistral", "step3p5", "seed_oss",
                "minimax_m2", "gemma4", "step3"}
CHUNKINGS = ("one", "token", "token+empty", "random")
GRANITE_SPLIT = re.compile(r"(?:Here's|Here is) my thought process:.*?(?:Here's|Here is) my response:", re.DOTALL)


def _normalized(answer: dict[str, Any]) -> dict[str, Any]:
    """A stream cannot tell "" from null: compare them alike."""
    message = dict(answer["message"])
    message["content"] = message["content"] or None
    message["reasoning"] = message["reasoning"] or None
    return {"message": message, "finish_reason": answer["finish_reason"]}


def keeps_calls(case: dict[str, Any]) -> bool:
    request = case["request"]
    return bool(request.get("tools")) and request.get("tool_choice", "auto") != "none" and case["enable_auto_tools"]


def explained(case: dict[str, Any], want: dict[str, Any], got: dict[str, Any]) -> str | None:
    """The documented reason a stream may differ from the non-streaming answer, or None."""
    w, g = want["message"], got["message"]
    text = case["text"]
    kwargs = case["request"].get("chat_template_kwargs") or {}
    if (case["reasoning_parser"] in ("nemotron_v3", "granite_thinking_parser")
            and (kwargs.get("enable_thinking") is False or kwargs.get("force_nonempty_content") is True)
            and not (g["content"] or "").strip() and not (w["reasoning"] or "").strip()):
        # the content was blank: the answer swapped it with the reasoning (which then also went
        # through the tool parser)
        return f"{case['reasoning_parser']}: a whitespace-only (granite: absent) content swapped with the reasoning"
    if case["reasoning_parser"] == "ernie45":
        reason = ernie45_stream(case["text"])
        if reason:
            return reason
    if case["reasoning_parser"] == "hunyuan_a13b":
        reason = hunyuan_stream(case["text"])
        if reason:
            return reason
    if (case["reasoning_parser"] == "minimax_m3" and case["chat_template_kwargs"].get("thinking_mode") == "enabled"
            and "<mm:think>" in text and not text.startswith("<mm:think>")):
        return "minimax_m3 thinking on: a <mm:think> after text"
    if case["reasoning_parser"] == "olmo3" and "</think>" not in text and w["reasoning"] is None:
        return "olmo3: an output that never writes </think> (content whole, streamed as reasoning)"
    if (case["tool_parser"] == "olmo3" and w["reasoning"] == g["reasoning"] and w["content"] is None
            and w["tool_calls"] and g["tool_calls"] == w["tool_calls"] and "<function_calls>" in text):
        return "olmo3: text before the <function_calls> block"
    if case["family"] == "k2_horizon":
        reason = k2_horizon_stream(case, w, g)
        if reason:
            return reason
    if w["reasoning"] != g["reasoning"] and case["family"] != "granite":
        return None
    if case["malformed"] and (g["tool_calls"] or not keeps_calls(case)):
        # (when the request keeps no calls, what the family streamed as a call is just not shown)
        return "a call streamed before it turned malformed"
    same_calls = w["tool_calls"] == g["tool_calls"]
    if (case["tool_parser"] in ENGINE_TOOLS and same_calls and (w["tool_calls"] or not keeps_calls(case))
            and g["content"] and g["content"].lstrip() == (w["content"] or "") and g["content"] != w["content"]):
        # (when the request keeps no calls the family still found them and stripped the content)
        return "leading whitespace of content before calls"
    if (case["tool_parser"] in ("llama3_json", "llama4_json") and same_calls and w["tool_calls"]
            and w["content"] is None and g["content"] == text[:text.find("{")]):
        return "prose before the first llama3_json call"
    if (case["tool_parser"] == "phi4_mini_json" and same_calls and w["content"] is None
            and g["content"] == text[:text.find("functools[")]):
        return "text before the phi4_mini_json block"
    if (case["tokenizer"] == "mistral3" and same_calls and not w["tool_calls"] and "[TOOL_CALLS]" in text
            and g["content"] == text.split("[TOOL_CALLS]")[0] + (w["content"] or "")):
        return "text before [TOOL_CALLS] without a valid call"
    if case["family"] == "granite" and same_calls:
        lead = text.lstrip()
        if not any(lead.startswith(m) for m in GRANITE_THINK) and GRANITE_SPLIT.search(text):
            return "text before the thought-process marker"
        after = next((lead[len(m):] for m in GRANITE_THINK if lead.startswith(m)), None)
        if (after is not None and not any(m in after for m in GRANITE_RESPONSE) and w["reasoning"] is None
                and case["request"].get("include_reasoning", True)):
            return "a thought process never answered, reasoning returned"
    return None


def k2_horizon_stream(case: dict[str, Any], w: dict[str, Any], g: dict[str, Any]) -> str | None:
    """k2_horizon: where the stream sent what vLLM's answer reads otherwise (core/parsers/README.md)."""
    from core.parsers.families.k2_horizon import CALLS_OPEN, EFFORT_TAGS

    if case["reasoning_parser"] == "k2_horizon":
        start, end = EFFORT_TAGS[case["chat_template_kwargs"].get("reasoning_effort", "high")]
        body = case["text"].removeprefix(start)
        if end not in body and CALLS_OPEN not in body:
            return ("k2_horizon: an output with neither a close tag nor <ifm|tool_calls> "
                    "(content, streamed as reasoning)")
        if -1 < body.find(CALLS_OPEN) < body.find(end):
            return "k2_horizon: a <ifm|tool_calls> before the close tag (the answer's reasoning runs to the close tag)"
    if (case["tool_parser"] == "k2_horizon" and g["tool_calls"] and not w["tool_calls"]
            and w["reasoning"] == g["reasoning"]):
        return "k2_horizon: a group that failed after a call went out"
    return None


def ernie45_stream(text: str) -> str | None:
    """ernie45: where the stream sends what vLLM's answer later narrows (core/parsers/README.md)."""
    if text.find("<think>") > 0:
        return "ernie45: a <think> after text"
    if "</think>" not in text:
        return None
    content = text.split("</think>", 1)[1]
    start = content.find("<response>")
    if start == -1:
        return None
    if "</response>" not in content[start:]:
        return "ernie45: a <response> never closed"
    if content[:start].strip():
        return "ernie45: text before <response>"
    return None


def hunyuan_stream(text: str) -> str | None:
    """hunyuan_a13b: where the stream sends what vLLM's answer reads otherwise (core/parsers/README.md)."""
    think, rs, end = "<think>\n", "\n</think>\n<answer>\n", "\n</answer>"
    if text.startswith(think):
        at = text.find(rs, len(think))
        if at == -1:
            return "hunyuan_a13b: cut off in its reasoning"
        if end in text[:at + len(rs)] and end not in text[at + len(rs):]:
            return "hunyuan_a13b: END in the reasoning only"
    elif end not in text and think in text and rs in text[text.find(think):]:
        return "hunyuan_a13b: <think> after text"
    return None


def check(case: dict[str, Any], models: dict, chunking: str, rng: random.Random) -> str | None:
    """Stream `case` one way; return why it differs (documented), or fail."""
    n = len(case["token_ids"])
    cuts = {"one": [], "token": list(range(n)), "token+empty": list(range(n)),
            "random": rng.sample(range(n), min(n, rng.randint(1, 6)))}[chunking]
    got = streamed_message(case, models, cuts, empty_last_chunk=chunking == "token+empty" or rng.random() < 0.3)
    assert got.pop("max_state", 0) < 4096 + 4 * len(case["text"])
    want = _normalized(non_streaming_message(case, models))
    got = _normalized(got)
    if got == want:
        return None
    reason = explained(case, want, got)
    assert reason is not None, (f"{case['family']} {chunking}: stream differs\n{case}\n"
                                f"non-streaming {orjson.dumps(want).decode()}\nstreamed      {orjson.dumps(got).decode()}")
    return reason


FUZZ = settings(max_examples=60, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("family", sorted(FAMILIES))
@FUZZ
@given(rng=st.randoms(use_true_random=False), chunking=st.sampled_from(CHUNKINGS))
def test_any_chunking_streams_to_the_non_streaming_answer(parser_models, family, rng, chunking):
    case = prepare_case(make_case(family, rng), parser_models)
    check(case, parser_models, chunking, rng)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_thousands_of_cases_per_family(parser_models, family):
    counts: dict[str, int] = {}
    for seed in range(2000):
        rng = random.Random(f"{family}-{seed}")
        case = prepare_case(make_case(family, rng), parser_models)
        for chunking in CHUNKINGS:
            reason = check(case, parser_models, chunking, rng) or "equal"
            counts[reason] = counts.get(reason, 0) + 1
    print(f"\n{family}: {counts}", file=sys.stderr)  # (recorded in core/parsers/README.md)
    assert counts.get("equal", 0) > sum(counts.values()) // 2, counts
