"""Kimi K3 (`--reasoning-parser kimi_k3 --tool-call-parser kimi_k3`) over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/kimi_k3.json (vLLM 0.33's answers,
tests/oracle/record_kimi_k3.py) go through HTTP on the same tokenizer (Qwen3's with `<|open|>`,
`<|close|>`, `<|sep|>`): the markers must survive the route's decode (the parsers turn
skip_special_tokens off), the non-streaming message equals vLLM's (but for the documented
look-ahead outputs, `test_kimi_k3.lookahead`, where it is vLLM's own recorded stream), and the
stream, one token per call with the state carried by the client, aggregates to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.core.parsers.parser_models import KIMI_K3_TOKENS, with_added_tokens
from tests.core.parsers.test_kimi_k3 import as_streamed, lookahead
from tests.oracle_fixtures import scrub
from tests.proxy.frontier_derender import aggregate

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier" / "kimi_k3.json")
                    .read_text(encoding="utf-8"))
EOS = 151645  # <|im_end|>
RECORDS = [r for r in GOLDEN["records"] if r["case"]["reasoning_parser"] == r["case"]["tool_parser"] == "kimi_k3"]
CHAT = "/v1/chat/completions/derender"
RID = "generate-tokens-chatcmpl-0011223344556677"


@pytest.fixture(scope="module")
def k3_model(model_dirs, tmp_path_factory) -> ModelInfo:
    from proxy.model_loader import load_model

    path = with_added_tokens(model_dirs["qwen3"], tmp_path_factory.mktemp("k3") / "tiny-kimi-k3", KIMI_K3_TOKENS)
    return load_model(str(path), served_model_names=["tiny-kimi-k3"])


@pytest.fixture
async def client(aiohttp_client, k3_model):
    config = ServerConfig(reasoning_parser="kimi_k3", tool_call_parser="kimi_k3", enable_auto_tool_choice=True)
    return await aiohttp_client(create_app(config, k3_model))


def _request(case):
    return {"messages": [{"role": "user", "content": "hi"}], **case["request"],
            "chat_template_kwargs": case["chat_template_kwargs"]}


def _choice(ids, finish, last=True):
    """The engine's choice: the stop token's id as stop_reason on the chunk that ends by EOS."""
    stop = EOS if last and finish == "stop" and ids and ids[-1] == EOS else None
    return {"index": 0, "finish_reason": finish if last else None, "stop_reason": stop, "token_ids": ids}


def _message(message_or_agg, calls):
    shaped = [{"id": scrub({"id": c.get("id")})["id"], "name": (c.get("function") or c)["name"],
               "arguments": (c.get("function") or c)["arguments"]} for c in calls]
    return {"reasoning": message_or_agg.get("reasoning") or None, "content": message_or_agg.get("content") or None,
            "tool_calls": shaped}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
async def test_derender_equals_vllm_and_streams_to_it(client, k3_model, record):
    prompt = k3_model.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<|open|>think<|sep|>")
    ids, finish, request = record["token_ids"], record["engine_finish_reason"], _request(record["case"])
    want = dict(record["message"], content=record["message"]["content"] or None)
    resp = await client.post(CHAT, json={"prompt_token_ids": prompt, "chat_request": request, "generate_response": {
        "request_id": RID, "choices": [_choice(ids, finish)]}})
    body = await resp.json()
    assert resp.status == 200, body
    choice = body["choices"][0]
    got = _message(choice["message"], choice["message"].get("tool_calls") or [])
    if got != want:
        assert lookahead(record["case"]) and as_streamed(record, got), (got, want)
        want = got
    assert choice["finish_reason"] == record["finish_reason"]

    # one engine token per call, the stream state carried by the client
    state, chunks = None, []
    for n, tid in enumerate(ids):
        chunk = {"request_id": RID, "usage": None, "output_mode": "tokens",
                 "choices": [_choice([tid], finish, last=n == len(ids) - 1)]}
        resp = await client.post(CHAT, json={"stream": True, "generate_chunk": chunk, "stream_state": state,
                                             "prompt_token_ids": prompt if n == 0 else None, "chat_request": request})
        data = await resp.json()
        assert resp.status == 200, data
        state = data["stream_state"]
        chunks.append(data["chunk"])
    agg = aggregate(chunks)
    assert agg["finish_reason"] == record["finish_reason"]
    assert _message(agg, [agg["calls"][i] for i in sorted(agg["calls"])]) == want


def _k3_architecture_dir(model_dirs, tmp_path_factory) -> Path:
    """The K3 test tokenizer (with `<|end_of_msg|>` too) under K3's architecture, without a chat
    template (K3 ships none)."""
    path = with_added_tokens(model_dirs["qwen3"], tmp_path_factory.mktemp("k3arch") / "k3",
                             [*KIMI_K3_TOKENS, "<|end_of_msg|>"])
    cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    (path / "config.json").write_text(json.dumps({**cfg, "architectures": ["KimiK3ForConditionalGeneration"]}))
    tok_cfg = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_cfg.pop("chat_template", None)
    (path / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    for extra in path.glob("chat_template*"):
        extra.unlink()
    return path


@pytest.mark.slow  # ~3 s: its own model directory, tokenizer and app (the fast encoder's build)
async def test_k3_architecture_renders_with_kimi_k3_and_derenders(aiohttp_client, model_dirs, tmp_path_factory):
    """The architecture alone picks the `kimi_k3` renderer (core/renderers/kimi_k3.py; no chat
    template needed): the chat render route answers K3's prompt, and the derender route, which takes
    the prompt's token ids, answers as vLLM. (`--tokenizer-mode hf` still takes the template path:
    tests/proxy/test_kimi_k3_render.py.)"""
    from proxy.model_loader import load_model

    path = _k3_architecture_dir(model_dirs, tmp_path_factory)
    model = load_model(str(path), served_model_names=["k3"])
    assert model.renderer == "kimi_k3"
    config = ServerConfig(reasoning_parser="kimi_k3", tool_call_parser="kimi_k3", enable_auto_tool_choice=True)
    client = await aiohttp_client(create_app(config, model))
    resp = await client.post("/v1/chat/completions/render", json={"messages": [{"role": "user", "content": "hi"}],
                                                                  "chat_template_kwargs": {"thinking": False}})
    body = await resp.json()
    assert resp.status == 200, body
    assert model.tokenizer.decode(body["token_ids"]) == (
        '<|open|>message role="user"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>'
        '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>')
    record = next(r for r in RECORDS if r["case"]["name"] == "content_call__k3_auto_on")
    resp = await client.post(CHAT, json={
        "prompt_token_ids": body["token_ids"], "chat_request": _request(record["case"]), "generate_response": {
            "request_id": RID, "choices": [_choice(record["token_ids"], record["engine_finish_reason"])]}})
    body = await resp.json()
    assert resp.status == 200, body
    message = body["choices"][0]["message"]
    assert _message(message, message.get("tool_calls") or []) == record["message"]
