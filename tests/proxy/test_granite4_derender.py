"""Granite 4 (`--tool-call-parser granite4 --reasoning-parser granite_thinking_parser`) over the
chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/granite4.json (vLLM 0.33's answers,
tests/oracle/record_granite4.py) go through HTTP on the same tokenizer (Qwen3's with Granite 4's
role markers): the non-streaming message and finish_reason equal vLLM's (but where
force_nonempty_content makes vLLM's stream repeat the reasoning as content: ours is that stream's
sum), and the stream, one token per call with the state carried by the client, aggregates to it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.proxy.frontier_derender import aggregate

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier" / "granite4.json")
                    .read_text(encoding="utf-8"))
EOS = GOLDEN["eos_token_id"]
FLAGS = ("granite_thinking_parser", "granite4")
# both parsers; not the documented stream difference (tests/core/parsers/test_granite4.py): a call
# that failed after an earlier one went out
RECORDS = [r for r in GOLDEN["records"]
           if (r["case"]["reasoning_parser"], r["case"]["tool_parser"]) == FLAGS
           and r["case"]["name"] != "bad_second_call__default"]
# force_nonempty_content, no content but newlines: ours is vLLM's stream, the reasoning and then all of
# it again as content (core/parsers/README.md, "vLLM 0.33 bugs we do not follow")
REPEATED = {"plain__force", "reasoning_only__force", "empty_content__force", "no_think_tags__force",
            "truncated_in_reasoning__force"}
CHAT = "/v1/chat/completions/derender"
RID = "generate-tokens-chatcmpl-0011223344556677"
PROMPT = "<|start_of_role|>user<|end_of_role|>hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"


@pytest.fixture(scope="module")
def granite_model(parser_models) -> ModelInfo:
    return parser_models["granite4"]


@pytest.fixture
async def client(aiohttp_client, granite_model):
    config = ServerConfig(reasoning_parser=FLAGS[0], tool_call_parser=FLAGS[1], enable_auto_tool_choice=True)
    return await aiohttp_client(create_app(config, granite_model))


def _choice(ids, finish):
    return {"index": 0, "finish_reason": finish, "token_ids": ids,
            "stop_reason": EOS if finish == "stop" and ids and ids[-1] == EOS else None}


def _want(record):
    if record["case"]["name"] in REPEATED:
        repeated = record["vllm_stream"]["reasoning"]
        return {"reasoning": repeated, "content": repeated, "tool_calls": []}
    return record["message"]


def _shape(tool_id):
    return "chatcmpl-tool-<16hex>" if tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30 else tool_id


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
async def test_derender_equals_vllm_and_streams_to_it(client, granite_model, record):
    prompt = granite_model.tokenizer.encode(PROMPT)
    ids, finish = record["token_ids"], record["engine_finish_reason"]
    request = {"messages": [{"role": "user", "content": "hi"}], **record["case"]["request"],
               "chat_template_kwargs": record["case"]["chat_template_kwargs"]}
    want = _want(record)
    resp = await client.post(CHAT, json={"prompt_token_ids": prompt, "chat_request": request, "generate_response": {
        "request_id": RID, "choices": [_choice(ids, finish)]}})
    body = await resp.json()
    assert resp.status == 200, body
    choice = body["choices"][0]
    message = choice["message"]
    assert (message.get("reasoning"), message["content"]) == (want["reasoning"], want["content"])
    assert [{"id": _shape(c["id"]), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls") or []] == want["tool_calls"]
    assert choice["finish_reason"] == record["finish_reason"]

    state, chunks = None, []
    for n, tid in enumerate(ids):
        end = n == len(ids) - 1
        chunk = {"request_id": RID, "usage": None, "output_mode": "tokens",
                 "choices": [_choice([tid], finish) if end else
                             {"index": 0, "finish_reason": None, "stop_reason": None, "token_ids": [tid]}]}
        resp = await client.post(CHAT, json={"stream": True, "generate_chunk": chunk, "stream_state": state,
                                             "prompt_token_ids": prompt if n == 0 else None,
                                             "chat_request": request})
        data = await resp.json()
        assert resp.status == 200, data
        state = data["stream_state"]
        chunks.append(data["chunk"])
    agg = aggregate(chunks)
    assert (agg["reasoning"], agg["content"]) == (want["reasoning"], want["content"] or None)
    assert [agg["calls"][i] for i in sorted(agg["calls"])] == want["tool_calls"]
    assert agg["finish_reason"] == record["finish_reason"]


def _payload(state: str) -> str:
    """The decoded stream_state payload ("ds1." + base64url(orjson(payload)) [+ "." + signature])."""
    body = state.removeprefix("ds1.").split(".")[0]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8")


@pytest.mark.parametrize("name", sorted(REPEATED))
async def test_the_repeat_with_the_finish_on_an_empty_last_chunk(client, granite_model, name):
    """force_nonempty_content, no content: the client-carried state keeps the reasoning sent so far
    (this mode only), and the finish alone in an empty last chunk sends it again as content."""
    record = next(r for r in RECORDS if r["case"]["name"] == name)
    prompt = granite_model.tokenizer.encode(PROMPT)
    request = {"messages": [{"role": "user", "content": "hi"}], **record["case"]["request"],
               "chat_template_kwargs": record["case"]["chat_template_kwargs"]}
    want = _want(record)
    state, chunks = None, []
    for n, tid in enumerate([*record["token_ids"], None]):
        choice = ({"index": 0, "finish_reason": None, "stop_reason": None, "token_ids": [tid]} if tid is not None
                  else _choice([], record["engine_finish_reason"]))
        chunk = {"request_id": RID, "usage": None, "output_mode": "tokens", "choices": [choice]}
        resp = await client.post(CHAT, json={"stream": True, "generate_chunk": chunk, "stream_state": state,
                                             "prompt_token_ids": prompt if n == 0 else None,
                                             "chat_request": request})
        data = await resp.json()
        assert resp.status == 200, data
        if tid is None:  # (what the end repeats was in the state the client carried)
            assert json.dumps(want["reasoning"])[1:-1] in _payload(state)
        state = data["stream_state"]
        chunks.append(data["chunk"])
    assert not any(c["choices"][0]["delta"].get("content") for c in chunks[:-1])  # (sent at the end only)
    agg = aggregate(chunks)
    assert (agg["reasoning"], agg["content"]) == (want["reasoning"], want["content"])
    assert not agg["calls"] and agg["finish_reason"] == record["finish_reason"]
