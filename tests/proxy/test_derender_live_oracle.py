"""Live comparison with vLLM 0.33's derender (the oracle render servers), skipped when absent.

* 8110: hermes + qwen3 parsers. Replies with reasoning, content, one and two tool calls,
  unicode arguments, `enable_thinking: false`, `include_reasoning: false`; one token per call.
  Our non-streaming response equals vLLM's field for field (tool ids by shape); our streamed
  aggregate equals our (= vLLM's) non-streaming message. vLLM's own streamed aggregate is
  compared too, with whitespace-only content blanked: vLLM 0.33 streams it next to tool
  calls while its non-stream drops it (docs/vllm-wire-spec.md §0.3: we follow the non-stream rule).
* 8111 / 8112: plain servers (Qwen3, Llama-3 at max_model_len 256): stop strings, and random
  payloads (special, byte and out-of-vocab ids, flags, logprob cuts, random chunkings) whose
  non-streaming responses and every streamed chunk must equal vLLM's.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.request

import aiohttp
import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.oracle_fixtures import scrub

pytestmark = pytest.mark.oracle

PARSERS_URL = "http://127.0.0.1:8110"
PLAIN_URL = "http://127.0.0.1:8111"
PROMPT = [151644, 872, 198, 45764, 23811, 13, 151645, 198, 151644, 77091, 198]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "w", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CASES = {
    "tool": ('<think>\nThe user wants weather. 天气\n</think>\n\nLet me check.\n<tool_call>\n'
             '{"name": "get_weather", "arguments": {"city": "Paris, 巴黎"}}\n</tool_call>', {"tools": TOOLS}),
    "plain": ("<think>\nhmm\n</think>\n\nHello there! 🎉", {}),
    "no_thinking": ("Hello there, no think.", {"chat_template_kwargs": {"enable_thinking": False}}),
    "two_calls": ('<think>\nx\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "A"}}\n'
                  '</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "B"}}\n</tool_call>',
                  {"tools": TOOLS}),
    "include_reasoning_false": ("<think>\nsecret\n</think>\n\nvisible", {"include_reasoning": False}),
    "tool_choice_none": ('<think>\nno\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>',
                         {"tools": TOOLS, "tool_choice": "none"}),
    "length_inside_call": ('<think>\nx\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro',
                           {"tools": TOOLS}),
}


def _server_is(url: str, model: str, *, parses_reasoning: bool, max_model_len: int | None = None) -> bool:
    """Whether `url` is a vLLM server configured as the comparison needs: the served model (and
    context length), and whether it parses reasoning (probed with `<think>x</think>y` in Qwen3 ids).
    A server on the port configured otherwise (another test file's layout) skips, not fails."""
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:
            served = json.loads(resp.read())["data"][0]
        if served["id"] != model or (max_model_len is not None and served.get("max_model_len") != max_model_len):
            return False
        if model != "tiny-qwen3":
            return not parses_reasoning
        probe = {"model": model, "prompt_token_ids": [151644, 77091, 198],
                 "chat_request": {"messages": [{"role": "user", "content": "x"}]},
                 "generate_response": {"request_id": "generate-tokens-probe", "choices": [
                     {"index": 0, "finish_reason": "stop", "stop_reason": None, "token_ids": [151667, 87, 151668, 88]}]}}
        request = urllib.request.Request(url + "/v1/chat/completions/derender", data=json.dumps(probe).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            message = json.loads(resp.read())["choices"][0]["message"]
    except (OSError, ValueError, KeyError, IndexError):
        return False
    return (message.get("reasoning") == "x") == parses_reasoning


def _aggregate(chunks: list[dict]) -> tuple:
    reasoning = content = ""
    calls: dict[int, list[str]] = {}
    finish = None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            reasoning += delta.get("reasoning") or ""
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls", []):
                entry = calls.setdefault(tc["index"], ["", ""])
                if tc.get("function"):
                    entry[0] += tc["function"].get("name") or ""
                    entry[1] += tc["function"].get("arguments") or ""
            finish = choice["finish_reason"] or finish
    return reasoning or None, content or None, [tuple(v) for v in calls.values()], finish


def _message_tuple(response: dict) -> tuple:
    choice = response["choices"][0]
    msg = choice["message"]
    return (msg["reasoning"], msg["content"],
            [(t["function"]["name"], t["function"]["arguments"]) for t in msg.get("tool_calls", [])],
            choice["finish_reason"])


def _args_as_json(agg: tuple) -> tuple:
    calls = []
    for name, args in agg[2]:
        try:
            calls.append((name, json.loads(args)))
        except ValueError:
            calls.append((name, args))
    return agg[0], agg[1], calls, agg[3]


@pytest.fixture
async def ours(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(tool_call_parser="hermes", reasoning_parser="qwen3",
                                                        enable_auto_tool_choice=True), qwen3))


async def _stream(post, ids, finish, chat_request):
    state, chunks = None, []
    for n, tid in enumerate(ids):
        last = n == len(ids) - 1
        body = {"stream": True, "model": "tiny-qwen3", "stream_state": state, "prompt_token_ids": PROMPT,
                "chat_request": dict(chat_request, stream=True),
                "generate_chunk": {"request_id": "generate-tokens-live", "output_mode": "tokens", "choices": [
                    {"index": 0, "finish_reason": finish if last else None,
                     "stop_reason": 151645 if last and finish == "stop" else None, "token_ids": [tid]}]}}
        status, out = await post(body)
        assert status == 200, out
        chunks.append(out["chunk"])
        state = out["stream_state"]
    return chunks


@pytest.mark.skipif(not _server_is(PARSERS_URL, "tiny-qwen3", parses_reasoning=True),
                    reason="no vLLM 0.33 render server with hermes + qwen3 on 8110")
@pytest.mark.parametrize("name", sorted(CASES))
async def test_parser_server_matches_vllm(ours, qwen3, name):
    text, extra = CASES[name]
    finish = "length" if name == "length_inside_call" else "stop"
    ids = qwen3.tokenizer.encode(text) + ([151645] if finish == "stop" else [])
    chat_request = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Say hello."}], **extra}
    whole = {"model": "tiny-qwen3", "prompt_token_ids": PROMPT, "chat_request": chat_request,
             "generate_response": {"request_id": "generate-tokens-live", "choices": [
                 {"index": 0, "finish_reason": finish, "stop_reason": 151645 if finish == "stop" else None,
                  "token_ids": ids}]}}
    async with aiohttp.ClientSession() as session:
        async def post_vllm(body):
            async with session.post(PARSERS_URL + "/v1/chat/completions/derender", json=body) as resp:
                return resp.status, await resp.json()

        async def post_ours(body):
            resp = await ours.post("/v1/chat/completions/derender", json=body)
            return resp.status, await resp.json()

        v_status, v_whole = await post_vllm(whole)
        o_status, o_whole = await post_ours(whole)
        assert (o_status, scrub(o_whole)) == (v_status, scrub(v_whole))
        ours_stream = _args_as_json(_aggregate(await _stream(post_ours, ids, finish, chat_request)))
        vllm_stream = _args_as_json(_aggregate(await _stream(post_vllm, ids, finish, chat_request)))
        # vLLM streams whitespace-only content next to tool calls, which its non-stream drops:
        # we follow the non-stream rule (docs/vllm-wire-spec.md §0.3), so compare with that content blanked
        vllm_stream = (vllm_stream[0], vllm_stream[1] if (vllm_stream[1] or "").strip() else None, *vllm_stream[2:])
        assert ours_stream == vllm_stream
        if name != "length_inside_call":
            # a call cut by `length` cannot be parsed whole (non-stream: the raw text is content),
            # while a stream has already sent its name and argument prefix: vLLM does the same
            assert ours_stream == _args_as_json(_message_tuple(o_whole))


PLAIN_TEXTS = ["The answer is 42. STOP here please", "数字 一 二 三 四 END 五", "a\n\nb\n\nc 🎉 d"]


@pytest.mark.skipif(not _server_is(PLAIN_URL, "tiny-qwen3", parses_reasoning=False),
                    reason="no vLLM 0.33 plain render server for tiny-qwen3 on 8111")
@pytest.mark.parametrize("text", PLAIN_TEXTS)
@pytest.mark.parametrize("stop,include,min_tokens", [(["STOP", "END"], False, 0), (["\n\n", "三"], True, 0),
                                                      (["e", "二"], False, 3)])
async def test_plain_server_stop_strings_match_vllm(aiohttp_client, qwen3, text, stop, include, min_tokens):
    client = await aiohttp_client(create_app(ServerConfig(), dataclasses.replace(qwen3)))
    ids = qwen3.tokenizer.encode(text) + [151645]
    body = {"model": "tiny-qwen3", "prompt_token_ids": PROMPT,
            "chat_request": {"messages": [{"role": "user", "content": "x"}], "stop": stop,
                             "include_stop_str_in_output": include, "min_tokens": min_tokens},
            "generate_response": {"request_id": "generate-tokens-live", "choices": [
                {"index": 0, "finish_reason": "stop", "stop_reason": None, "token_ids": ids}]}}
    async with aiohttp.ClientSession() as session:
        async with session.post(PLAIN_URL + "/v1/chat/completions/derender", json=body) as resp:
            expected = await resp.json()
    got = await (await client.post("/v1/chat/completions/derender", json=body)).json()
    assert scrub(got) == scrub(expected)


# -- random payloads against the plain servers (Qwen3 on 8111, Llama-3 max_model_len 256 on 8112) --

PLAIN_SERVERS = {"qwen3": "http://127.0.0.1:8111", "llama3": "http://127.0.0.1:8112"}
PLAIN_SERVERS_UP = (_server_is(PLAIN_SERVERS["qwen3"], "tiny-qwen3", parses_reasoning=False)
                    and _server_is(PLAIN_SERVERS["llama3"], "tiny-llama3", parses_reasoning=False, max_model_len=256))


def _post_sync(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _random_ids(rng, tok, n) -> list[int]:
    special = sorted(tok.all_special_ids)
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(rng.choice(special) if r < 0.12 else rng.randint(0, 300) if r < 0.3
                   else len(tok) + rng.randint(0, 50) if r < 0.33 else rng.randint(0, len(tok) - 1))
    return out


def _models(qwen3, llama3):
    return {"qwen3": qwen3, "llama3": dataclasses.replace(llama3, max_model_len=256)}


@pytest.mark.skipif(not PLAIN_SERVERS_UP, reason="no vLLM 0.33 plain servers on 8111 (tiny-qwen3) and 8112 (tiny-llama3, 256)")
@pytest.mark.parametrize("seed", range(4))
def test_random_non_streaming_matches_vllm(qwen3, llama3, seed):
    """Random ids (special, byte, out-of-vocab), prompts, skip/spaces flags, logprobs cuts."""
    import random

    from core.derender import DerenderSettings, derender_chat
    from core.protocol.derender import validate_derender_body

    rng = random.Random(seed)
    models = _models(qwen3, llama3)
    for _ in range(25):
        family = rng.choice(sorted(models))
        model, tok = models[family], models[family].tokenizer
        ids = _random_ids(rng, tok, rng.randint(1, 30))
        req = {"messages": [{"role": "user", "content": "x"}]}
        for flag in ("skip_special_tokens", "spaces_between_special_tokens"):
            if rng.random() < 0.5:
                req[flag] = rng.choice([True, False])
        choice = {"index": 0, "finish_reason": rng.choice(["stop", "length", None]), "stop_reason": None,
                  "token_ids": ids}
        if rng.random() < 0.5:
            req.update(logprobs=True, top_logprobs=rng.choice([0, 2, -1]))
            choice["logprobs"] = {"content": [{"token_id": i, "logprob": -1.0, "rank": 1, "top_logprobs": [
                {"token_id": i, "logprob": -1.0, "rank": 1},
                {"token_id": rng.randint(0, len(tok) - 1), "logprob": -2.0, "rank": 2}]} for i in ids]}
        prompt = [rng.randint(0, len(tok) + 50) for _ in range(rng.randint(0, 9))] if rng.random() < 0.7 else None
        body = {"model": model.name, "prompt_token_ids": prompt, "chat_request": req,
                "generate_response": {"request_id": "generate-tokens-x", "choices": [choice]}}
        status, expected = _post_sync(PLAIN_SERVERS[family] + "/v1/chat/completions/derender", body)
        assert status == 200, expected
        got = derender_chat(DerenderSettings(model=model), validate_derender_body(json.loads(json.dumps(body)), chat=True))
        assert scrub(json.loads(json.dumps(got))) == scrub(expected), body


@pytest.mark.skipif(not PLAIN_SERVERS_UP, reason="no vLLM 0.33 plain servers on 8111 (tiny-qwen3) and 8112 (tiny-llama3, 256)")
@pytest.mark.parametrize("seed", range(4))
def test_random_streams_match_vllm_chunk_for_chunk(qwen3, llama3, seed):
    """Random chunkings of random ids, EOS with and without stop_reason, logprobs, usage,
    return_token_ids, chat and completions: every chunk equals vLLM's (states: each side its own)."""
    import random

    from core.derender import DerenderSettings, derender_chat_stream, derender_completion_stream
    from core.protocol.derender import validate_derender_body

    rng = random.Random(100 + seed)
    models = _models(qwen3, llama3)
    for _ in range(12):
        family = rng.choice(sorted(models))
        model, tok = models[family], models[family].tokenizer
        ids = _random_ids(rng, tok, rng.randint(1, 20))
        finish = rng.choice(["stop", "length"])
        if finish == "stop":
            ids.append(rng.choice(model.eos_token_ids))
        chat = rng.random() < 0.5
        req: dict = {"messages": [{"role": "user", "content": "x"}]} if chat else {"prompt": "x"}
        if rng.random() < 0.5:
            req.update({"logprobs": True, "top_logprobs": rng.choice([0, 1, -1])} if chat
                       else {"logprobs": rng.choice([0, 1, -1])})
        if rng.random() < 0.4:
            req["skip_special_tokens"] = rng.choice([True, False])
        if rng.random() < 0.3:
            req["return_token_ids"] = True
        prompt = [rng.randint(0, len(tok) - 1) for _ in range(rng.randint(0, 9))] if rng.random() < 0.8 else None
        cuts = sorted(rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 5)))) if len(ids) > 1 else []
        parts = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)])]
        path = "/v1/chat/completions/derender" if chat else "/v1/completions/derender"
        fn = derender_chat_stream if chat else derender_completion_stream
        settings_ = DerenderSettings(model=model)
        vllm_state = our_state = None
        for n, part in enumerate(parts):
            last = n == len(parts) - 1
            choice = {"index": 0, "finish_reason": finish if last else None,
                      "stop_reason": part[-1] if last and finish == "stop" and rng.random() < 0.7 else None,
                      "token_ids": part}
            if "logprobs" in req:
                choice["logprobs"] = {"content": [{"token_id": i, "logprob": -1.0, "rank": 1, "top_logprobs": [
                    {"token_id": i, "logprob": -1.0, "rank": 1},
                    {"token_id": rng.randint(0, len(tok) - 1), "logprob": -2.0, "rank": 2}]} for i in part]}
            usage = {"prompt_tokens": 5, "completion_tokens": n + 1, "total_tokens": n + 6} if rng.random() < 0.3 else None
            gen = {"request_id": "generate-tokens-x", "usage": usage, "output_mode": "tokens", "choices": [choice]}
            body = {"stream": True, "model": model.name, "generate_chunk": gen,
                    "prompt_token_ids": prompt if n == 0 else None,
                    ("chat_request" if chat else "completion_request"): req}
            status, expected = _post_sync(PLAIN_SERVERS[family] + path, dict(body, stream_state=vllm_state))
            assert status == 200, expected
            got = fn(settings_, validate_derender_body(json.loads(json.dumps(dict(body, stream_state=our_state))),
                                                       chat=chat))
            got = json.loads(json.dumps(got))
            assert scrub(got["chunk"]) == scrub(expected["chunk"]), (n, body)
            vllm_state, our_state = expected["stream_state"], got["stream_state"]
