"""Replay every recorded vLLM 0.33 derender exchange through our HTTP routes, field for field.

Fixtures: tests/fixtures/oracle/derender_{chat,completions,errors,stream,seeding}.json (recorded from
real vLLM by tests/oracle/record_derender*.py). Compared after `scrub` (created timestamps,
tool-call ids by shape). Streaming sequences are replayed with OUR stream_state carried
between calls (the state is ours by design, docs/vllm-wire-spec.md §0.3) and compare the chunks.

Deliberate differences (docs/vllm-wire-spec.md §0.3), asserted explicitly rather than skipped:
* stop strings while streaming: vLLM answers 400, we derender (and cut);
* vLLM-format stream_state objects: foreign to us, a 400 `invalid stream_state ...`;
* legacy `"token_id:N"` logprobs (0.33 answers 400): we accept both shapes (docs/vllm-wire-spec.md §0.2), and
  the answer equals the one for the same request in the 0.33 shape.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.oracle_fixtures import load_fixture, scrub

SERVER_FLAGS = {
    "q3-plain": ("qwen3", {}, None),
    "q3-parsers": ("qwen3", {"tool_call_parser": "hermes", "reasoning_parser": "qwen3",
                             "enable_auto_tool_choice": True}, None),
    "l3-plain-256": ("llama3", {}, 256),
    "sp-plain": ("sentencepiece", {}, None),  # tiny-sp: tests/metaspace.py's Mistral-7B tokenizer
}

# vLLM rejects stop strings on streaming derender; we support them (docs/vllm-wire-spec.md §0.3)
STREAM_STOP_SUPPORTED = {"stream_chat_stop", "stream_completion_stop", "parser_stream_stop"}


def _sentencepiece_model():
    """The oracle's tiny-sp (tests/oracle/make_extra_models.py): same tokenizer, eos </s>, 32768 ctx."""
    from core.model import ModelInfo
    from tests.metaspace import mistral_v1_tokenizer

    return ModelInfo.build(tokenizer=mistral_v1_tokenizer(), served_model_names=["tiny-sp"],
                           hf_config={"model_type": "llama", "max_position_embeddings": 32768, "eos_token_id": 2})


def _cases(name: str) -> list[dict]:
    return [c for c in load_fixture(name) if c.get("server") in SERVER_FLAGS]


@pytest.fixture
def make_client(aiohttp_client, qwen3, llama3):
    models = {"qwen3": qwen3, "llama3": llama3, "sentencepiece": _sentencepiece_model()}

    async def make(server: str):
        family, flags, max_len = SERVER_FLAGS[server]
        model = models[family]
        if max_len is not None:
            model = dataclasses.replace(model, max_model_len=max_len)
        return await aiohttp_client(create_app(ServerConfig(**flags), model))

    return make


def _expand(case: dict) -> dict:
    """Rebuild the few requests the recorder stored abbreviated (see each case's request_note)."""
    request = case["request"]
    if case["name"] == "chat_choices_over_max_n_seqs":
        request = dict(request, generate_response=dict(request["generate_response"], choices=[
            {"index": i, "finish_reason": "length", "stop_reason": None, "token_ids": [9707]} for i in range(16385)]))
    elif case["name"] == "completion_responses_over_max_n_seqs":
        request = dict(request, generate_responses=request["generate_responses"][:1] * 16385)
    return request


async def _post(client, case: dict, body: dict | None = None):
    if case.get("request_raw") is not None and body is None:
        headers = case.get("request_headers") or {"Content-Type": "application/json"}
        resp = await client.post(case["path"], data=case["request_raw"].encode(), headers=headers)
    else:
        resp = await client.post(case["path"], json=body if body is not None else _expand(case))
    try:
        return resp.status, await resp.json(content_type=None)
    except ValueError:
        return resp.status, await resp.text()


def _to_new_shape(value):
    """The request with every legacy logprob candidate rewritten to the 0.33 `token_id` shape."""
    if isinstance(value, dict):
        token = value.get("token")
        if isinstance(token, str) and token.startswith("token_id:") and "logprob" in value:
            out = {"token_id": int(token.split(":", 1)[1]), "logprob": value["logprob"]}
            if "top_logprobs" in value:
                out["top_logprobs"] = _to_new_shape(value["top_logprobs"])
            return out
        return {k: _to_new_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_new_shape(v) for v in value]
    return value


def _is_legacy(request) -> bool:
    return _to_new_shape(request) != request


def _uses_vllm_state(case: dict) -> bool:
    request = case.get("request")
    return isinstance(request, dict) and request.get("stream_state") is not None


@pytest.mark.parametrize("case", _cases("derender_chat") + _cases("derender_completions") + _cases("derender_errors")
                         + [c for c in _cases("derender_seeding") if "calls" not in c], ids=lambda c: c["name"])
async def test_exchange(make_client, case):
    client = await make_client(case["server"])
    status, body = await _post(client, case)
    if _uses_vllm_state(case):
        # a vLLM DerenderStreamState is not ours: always refused, whatever vLLM did with it
        assert status == 400, body
        assert body["error"]["message"].startswith("invalid stream_state: "), body
        return
    if case["name"] in STREAM_STOP_SUPPORTED:
        assert case["status"] == 400 and status == 200, body
        assert set(body) == {"chunk", "stream_state"}
        return
    if case["name"] == "parser_stream_stop_and_missing_ids":
        # with stop strings allowed, the next vLLM check is the missing prompt_token_ids
        assert status == 400 and body["error"]["message"].startswith("prompt_token_ids is required"), body
        return
    if case["status"] == 400 and _is_legacy(case["request"]):
        assert status == 200, body
        status_new, body_new = await _post(client, case, _to_new_shape(case["request"]))
        assert status_new == 200 and scrub(body) == scrub(body_new)
        return
    assert status == case["status"], body
    expected = case["response"]
    if status == 200 and isinstance(body, dict) and "stream_state" in body:
        body, expected = body["chunk"], expected["chunk"]
    assert scrub(body) == scrub(expected)


def _stream_cases() -> list[dict]:
    return _cases("derender_stream") + [c for c in _cases("derender_seeding") if "calls" in c]


def _without_text(chunk: dict) -> dict:
    """A chunk with the parsed text of its deltas removed (role kept)."""
    out = dict(chunk, choices=[])
    for choice in chunk["choices"]:
        if "delta" in choice:
            out["choices"].append(dict(choice, delta={"role": choice["delta"]["role"]}))
        else:  # a completion chunk
            out["choices"].append(dict(choice, text=None))
    return out


def _aggregate(chunks: list[dict]) -> dict:
    """Per index: (reasoning, content, [(tool id shape, name, arguments)]), whitespace-only content
    blanked when the index made tool calls (vLLM 0.33 streams it, its non-stream drops it)."""
    agg: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            a = agg.setdefault(choice["index"], {"reasoning": "", "content": "", "calls": {}})
            delta = choice["delta"] if "delta" in choice else {"content": choice["text"]}
            a["reasoning"] += delta.get("reasoning") or ""
            a["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls", []):
                call = a["calls"].setdefault(tc["index"], ["", "", ""])
                call[0] = call[0] or scrub({"id": tc["id"]})["id"] or ""
                if tc.get("function"):
                    call[1] += tc["function"].get("name") or ""
                    call[2] += tc["function"].get("arguments") or ""
    for a in agg.values():
        if a["calls"] and not a["content"].strip():
            a["content"] = ""
        a["calls"] = [(i, n, json.loads(args) if args else args) for i, n, args in a["calls"].values()]
    return agg


# the tiny models' EOS ids (Qwen3, Llama 3): a chunk ending in one without a finish holds its
# text back until the next chunk says whether it was the stop token (core/derender/text.py)
EOS_IDS = {151645, 151643, 128001, 128008, 128009}


def _holds_a_stop_token(case: dict) -> bool:
    for call in case["calls"]:
        for choice in call["request"].get("generate_chunk", {}).get("choices") or ():
            ids = choice.get("token_ids") or ()
            if ids and ids[-1] in EOS_IDS and choice.get("finish_reason") is None:
                return True
    return False


@pytest.mark.parametrize("case", _stream_cases(), ids=lambda c: c["name"])
async def test_stream_sequence(make_client, case):
    """Chunk for chunk on the plain path. On the parser path, our parsers may release text at
    other chunk boundaries than vLLM's replaying ones (e.g. whitespace held until it is known
    whether a tool call follows), and an EOS id without a finish has its text held one chunk
    (vLLM sends it at once, and when the finish then comes on an empty chunk it has leaked), so
    there each chunk is compared without its delta texts and the per-index aggregates are
    compared at the end."""
    client = await make_client(case["server"])
    parser_path = SERVER_FLAGS[case["server"]][1] != {} or _holds_a_stop_token(case)
    vllm_states: list = []   # vLLM's returned states, in call order
    our_states: list = []
    ours_ok: list[dict] = []
    vllm_ok: list[dict] = []
    for n, call in enumerate(case["calls"]):
        body = dict(call["request"])
        sent = body.get("stream_state")
        if sent is not None:
            # the call echoes an earlier answer's state: send ours for the same earlier call
            body["stream_state"] = our_states[vllm_states.index(sent)]
        status, got = await _post(client, case, body)
        if call["status"] == 400 and _is_legacy(body):  # we accept the legacy logprob shape
            status_new, got_new = await _post(client, case, _to_new_shape(body))
            assert status == status_new == 200 and scrub(got["chunk"]) == scrub(got_new["chunk"])
            vllm_states.append(None)
            our_states.append(got["stream_state"])
            continue
        if (call["status"] == 400 and body.get("stream_state") is not None
                and call["response"]["error"]["message"].startswith("prompt_token_ids is required")):
            # docs/vllm-wire-spec.md §0.3: prompt_token_ids is needed on the first call only
            assert status == 200, (n, got)
            vllm_states.append(None)
            our_states.append(None)
            continue
        assert status == call["status"], (n, got)
        if status != 200:
            assert got == call["response"], n
            vllm_states.append(None)
            our_states.append(None)
            continue
        if parser_path:
            assert scrub(_without_text(got["chunk"])) == scrub(_without_text(call["response"]["chunk"])), n
            ours_ok.append(got["chunk"])
            vllm_ok.append(call["response"]["chunk"])
        else:
            assert scrub(got["chunk"]) == scrub(call["response"]["chunk"]), n
        assert isinstance(got["stream_state"], str) and len(got["stream_state"]) < 2048
        vllm_states.append(call["response"]["stream_state"])
        our_states.append(got["stream_state"])
    if parser_path:
        assert _aggregate(ours_ok) == _aggregate(vllm_ok)
