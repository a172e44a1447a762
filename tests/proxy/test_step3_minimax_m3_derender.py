"""Step 3 and MiniMax M3 over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/{step3,minimax_m3}.json (vLLM 0.33's
answers, tests/oracle/record_step3.py / record_minimax_m3.py) go through HTTP with the family's
flags on the same test tokenizer: the non-streaming message equals vLLM's (but for two vLLM bugs we
do not follow: Step 3's leading whitespace of the content with calls, `test_step3.LEADING_WS`, and
M3's text before a later `<mm:think>`, `VLLM_BUGS`), and the stream, one token per call with the
state carried by the client, aggregates to it (but for a Step 3 block cut off after a call went out).

Only requests whose detokenized text is the recorded one: Step 3's markers are special tokens,
kept in the text only when tools are on and tool_choice is not "none" (`skip_special_tokens`
false); M3 leaves skip_special_tokens on, so an output holding Qwen's special tokens is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.core.parsers.golden_checks import leading_whitespace_kept
from tests.core.parsers.parser_models import MINIMAX_M3_TOKENS, STEP3_TOKENS
from tests.core.parsers.test_step3 import LEADING_WS
from tests.models import served_as

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier"
EOS = 151645  # <|im_end|>
CHAT = "/v1/chat/completions/derender"
RID = "generate-tokens-chatcmpl-0011223344556677"
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
FAMILIES = {"step3": ("tiny-step3", STEP3_TOKENS, True), "minimax_m3": ("tiny-minimax-m3", MINIMAX_M3_TOKENS, False)}
# the documented stream differences (non-streaming still checked)
STREAM_DIFFERS = {"step3": ("truncated_after_call",), "minimax_m3": ()}
# (core/parsers/README.md, "vLLM 0.33 bugs we do not follow") ours is what the stream sends
VLLM_BUGS = {"minimax_m3": ("text_before_think__both_auto_thinking",)}


def _records(family: str) -> list[dict]:
    golden = json.loads((GOLDEN_DIR / f"{family}.json").read_text(encoding="utf-8"))
    out = []
    for record in golden["records"]:
        case = record["case"]
        if not case["reasoning_parser"] == case["tool_parser"] == family:
            continue
        if family == "step3" and (not case["request"].get("tools") or case["request"].get("tool_choice") == "none"):
            continue
        if family == "minimax_m3" and case["name"].startswith("special_tokens"):
            continue
        out.append(record)
    return out


CASES = [(family, record) for family in FAMILIES for record in _records(family)]


@pytest.fixture(scope="module")
def models(parser_models) -> dict[str, ModelInfo]:
    return {family: served_as(parser_models[family], name) for family, (name, _, _) in FAMILIES.items()}


def _choice(ids, finish):
    return {"index": 0, "finish_reason": finish, "token_ids": ids,
            "stop_reason": EOS if finish == "stop" and ids and ids[-1] == EOS else None}


def _calls(calls):
    return [{"id": "chatcmpl-tool-<16hex>" if c["id"].startswith("chatcmpl-tool-") and len(c["id"]) == 30 else c["id"],
             "name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in calls or []]


@pytest.mark.parametrize(("family", "record"), CASES, ids=[f"{f}-{r['case']['name']}" for f, r in CASES])
async def test_derender_equals_vllm_and_streams_to_it(aiohttp_client, models, family, record):
    config = ServerConfig(reasoning_parser=family, tool_call_parser=family, enable_auto_tool_choice=True)
    client = await aiohttp_client(create_app(config, models[family]))
    prompt = models[family].tokenizer.encode(PROMPT)
    ids, finish = record["token_ids"], record["engine_finish_reason"]
    case = record["case"]
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"],
               **({"chat_template_kwargs": case["chat_template_kwargs"]} if case["chat_template_kwargs"] else {})}
    resp = await client.post(CHAT, json={"prompt_token_ids": prompt, "chat_request": request, "generate_response": {
        "request_id": RID, "choices": [_choice(ids, finish)]}})
    body = await resp.json()
    assert resp.status == 200, body
    choice = body["choices"][0]
    want = record["message"]
    got = {"reasoning": choice["message"].get("reasoning"), "content": choice["message"]["content"],
           "tool_calls": _calls(choice["message"].get("tool_calls"))}
    if case["name"].startswith(VLLM_BUGS.get(family, ())):  # the stream below must send ours
        assert (got["reasoning"], got["content"]) != (want["reasoning"], want["content"])
        want = {**want, "reasoning": got["reasoning"], "content": got["content"]}
    if family == "step3" and case["name"].split("__")[0] in LEADING_WS and got != want:
        assert leading_whitespace_kept(got, want)
        want = {**want, "content": got["content"]}
    assert got == want
    assert choice["finish_reason"] == record["finish_reason"]
    if case["name"].startswith(STREAM_DIFFERS[family]):
        return

    state, agg, calls, last = None, {"reasoning": "", "content": ""}, {}, None
    for n, tid in enumerate(ids):
        end = n == len(ids) - 1
        chunk = {"request_id": RID, "usage": None, "output_mode": "tokens",
                 "choices": [_choice([tid], finish) if end else
                             {"index": 0, "finish_reason": None, "stop_reason": None, "token_ids": [tid]}]}
        resp = await client.post(CHAT, json={"stream": True, "generate_chunk": chunk, "stream_state": state,
                                             "prompt_token_ids": prompt if n == 0 else None, "chat_request": request})
        data = await resp.json()
        assert resp.status == 200, data
        state = data["stream_state"]
        for c in data["chunk"]["choices"]:
            delta = c["delta"]
            agg["reasoning"] += delta.get("reasoning") or ""
            agg["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                slot["id"] = slot["id"] or tc.get("id")
                slot["name"] += (tc.get("function") or {}).get("name") or ""
                slot["arguments"] += (tc.get("function") or {}).get("arguments") or ""
            last = c.get("finish_reason") or last
    assert (agg["reasoning"] or None) == (want["reasoning"] or None)
    assert (agg["content"] or None) == (want["content"] or None)
    assert _calls([{"id": c["id"], "function": c} for c in (calls[i] for i in sorted(calls))]) == want["tool_calls"]
    assert last == record["finish_reason"]
