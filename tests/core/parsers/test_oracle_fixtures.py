"""Replay the oracle recorder's server-level parser fixtures (tests/fixtures/oracle/parsers_*.json).

Each non-streaming case is a real `/v1/chat/completions/derender` answer of a vLLM 0.33 render
server started with the parser flags in the fixture. We decode the same token ids (special
tokens kept, the stop token dropped as derender does), run our pipeline with the same flags and
chat_request, and compare the message (content, reasoning, tool calls with ids by shape) and
finish_reason. Then the same ids are streamed one token per call and in chunks of 5, and the
aggregate must equal that message (docs/vllm-wire-spec.md §0.3: our stream agrees with the non-streaming answer).
"""

from __future__ import annotations

import json
import re

import pytest

from core.parsers.registry import REASONING_PARSERS, TOOL_PARSERS
from tests.core.parsers.helpers import chunk_texts, id_shape, stream
from tests.oracle_fixtures import ORACLE_FIXTURES, load_fixture

FILES = sorted(p.stem for p in ORACLE_FIXTURES.glob("parsers_*.json"))
MODELS = {"tiny-qwen3": "qwen3", "tiny-llama3": "llama3", "tiny-deepseek": "deepseek", "tiny-kimi": "kimi"}
# their own tokenizers, replayed over HTTP by tests/proxy/test_deepseek_derender.py and test_gptoss_derender.py
REPLAYED_ELSEWHERE = {"tiny-deepseek-v32", "tiny-deepseek-v4", "tiny-deepseek-v41", "tiny-gptoss"}
# malformed outputs whose non-streaming answer no stream can give (see test_golden.STREAM_CANNOT_MATCH)
STREAM_CANNOT_MATCH = {"invalid_json", "missing_name", "truncated_in_arguments", "truncated_after_name",
                       "truncated_unclosed_call_stop", "invalid_python", "truncated_length"}
# where our answer deliberately differs from vLLM's and is what the stream sends (checked against
# our non-streaming answer instead; core/parsers/README.md, "vLLM 0.33 bugs we do not follow")
# (granite: a thought process never answered, or cut off before its answer: vLLM makes it content)
STREAM_ANSWERS = {"parsers_granite:only_thought", "parsers_granite:truncated_length"}


# outputs where our answer deliberately differs from vLLM's (a vLLM bug, core/parsers/README.md,
# "vLLM 0.33 bugs we do not follow"): the content we answer instead of vLLM's
VLLM_BUGS = {
    # llama3_json: the prose before the first call is kept (vLLM drops it; both streams send it)
    "parsers_llama3_json:content_before_call": "Sure, let me check. ",
}


def _flag(command: str, name: str) -> str | None:
    m = re.search(rf"--{name} (\S+)", command)
    return m.group(1) if m else None


def _cases():
    out = []
    for name in FILES:
        for case in load_fixture(name):
            if case["server_info"]["model"] in REPLAYED_ELSEWHERE:
                continue
            if case.get("status") == 200 and case["path"] == "/v1/chat/completions/derender":
                case["id"] = f"{name}:{case['name']}"
                out.append(pytest.param(case, id=case["id"]))
    return out


def _setup(case, parser_models):
    from core.parsers.pipeline import ChatOutputParser
    from core.protocol.chat import ChatCompletionRequest

    command = case["server_info"]["command"]
    reasoning, tool = _flag(command, "reasoning-parser"), _flag(command, "tool-call-parser")
    if (reasoning and reasoning not in REASONING_PARSERS) or (tool and tool not in TOOL_PARSERS):
        pytest.skip(f"family not registered: {reasoning} / {tool}")
    served = case["server_info"]["model"]
    if served not in MODELS:  # e.g. tiny-mistral: mistral-common's tekken tokenizer mode, not supported here
        pytest.skip(f"tokenizer of {served} not supported by derender-proxy")
    model = parser_models[MODELS[served]]
    body = case["request"]
    request = ChatCompletionRequest(**body["chat_request"])
    parser = ChatOutputParser.for_request(
        model=model, reasoning_parser=reasoning, tool_call_parser=tool,
        enable_auto_tool_choice="--enable-auto-tool-choice" in command, request=request,
        chat_template_kwargs=request.chat_template_kwargs or {})
    choice = body["generate_response"]["choices"][0]
    ids = list(choice["token_ids"])
    stop_reason = choice.get("stop_reason")
    if (choice.get("finish_reason") or "stop") == "stop" and not isinstance(stop_reason, str) and ids:
        if ids[-1] == stop_reason or (stop_reason is None and ids[-1] in model.eos_token_ids):
            ids = ids[:-1]
    prompt = body["generate_response"].get("prompt_token_ids")
    return model, parser, ids, prompt, choice


@pytest.mark.parametrize("case", _cases())
def test_derender_message_equals_vllm(case, parser_models):
    model, parser, ids, prompt, choice = _setup(case, parser_models)
    expected = case["response"]["choices"][0]
    text = model.tokenizer.decode(ids, skip_special_tokens=False)
    reasoning, content, calls = parser.parse_complete(text, ids, prompt)
    message = expected["message"]
    if case["id"] in VLLM_BUGS:
        assert content != message["content"]
        message = {**message, "content": VLLM_BUGS[case["id"]]}
    if case["id"] in STREAM_ANSWERS:
        assert (reasoning, content) != (message["reasoning"], message["content"])
        return
    assert reasoning == message["reasoning"]
    assert content == message["content"]
    want = [(id_shape(c["id"]), c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []]
    assert [(id_shape(c["id"]), c["function"]["name"], c["function"]["arguments"]) for c in calls] == want
    assert parser.resolve_finish_reason(choice.get("finish_reason"), bool(calls)) == expected["finish_reason"]


@pytest.mark.parametrize("case", _cases())
def test_stream_aggregate_equals_vllm_message(case, parser_models):
    if case["id"] not in STREAM_ANSWERS and (case["name"] in STREAM_CANNOT_MATCH or case["id"] in STREAM_CANNOT_MATCH):
        pytest.skip("malformed output: vLLM's non-streaming rule looks ahead")
    model, parser, ids, prompt, choice = _setup(case, parser_models)
    message = case["response"]["choices"][0]["message"]
    if case["id"] in VLLM_BUGS:
        message = {**message, "content": VLLM_BUGS[case["id"]]}
    if case["id"] in STREAM_ANSWERS:  # ours: the stream's
        reasoning, content, _ = parser.parse_complete(model.tokenizer.decode(ids, skip_special_tokens=False), ids,
                                                      prompt)
        message = dict(message, reasoning=reasoning, content=content)
    for cuts in (list(range(len(ids))), list(range(0, len(ids), 5))):
        agg = stream(parser, chunk_texts(model, ids, cuts), prompt or [])
        assert agg["reasoning"] == (message["reasoning"] or "")
        assert agg["content"] == (message["content"] or "")
        want = [(c["function"]["name"], _loads(c["function"]["arguments"])) for c in message.get("tool_calls") or []]
        assert [(c["name"], _loads(c["arguments"])) for c in agg["tool_calls"]] == want
        if choice.get("finish_reason", "stop") == "stop":
            assert agg["finish_reason"] == case["response"]["choices"][0]["finish_reason"]


def _loads(arguments: str):
    """Arguments compared as JSON (docs/vllm-wire-spec.md §6.2); a named choice's raw non-JSON arguments as text."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
