"""QA: hostile and production-like use of the proxy over real HTTP.

* `stream_state`: garbled, truncated, forged (re-encoded payloads with mutated fields), foreign
  (another server configuration / endpoint), replayed from another request or choice, and
  prompt ids that change between calls: always a 200 or a 400 `invalid stream_state ...`.
* The front door with the official `openai` client (sync and async): bounded concurrency,
  cancellations mid-stream, n>1 with stop strings, logprobs edge values, max_tokens 1, echo with
  max_tokens 0, tool_choice variants, a long prompt while other requests run, and token ids past
  the vocabulary (a real engine must never receive them).
* Auth and metrics interplay.

Known bugs are `xfail(strict=True, reason="BUG: ...")` so the suite stays green and the fix flips them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time
from typing import Any

import openai
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.proxy.frontdoor_stack import PARSERS, Stack, post_raw
from tests.proxy.loop_watch import assert_loop_kept_running, watch_loop

PROMPT = [151644, 872, 198, 45764, 23811, 13, 151645, 198, 151644, 77091, 198]
RID = "generate-tokens-chatcmpl-0011223344556677"
CHAT = "/v1/chat/completions/derender"
CMPL = "/v1/completions/derender"
MESSAGES = [{"role": "user", "content": "Say something."}]


def chunk(ids, finish=None, stop_reason=None, index=0, rid=RID):
    return {"request_id": rid, "usage": None, "output_mode": "tokens",
            "choices": [{"index": index, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": ids}]}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def payload_of(state: str) -> Any:
    return orjson.loads(unb64(state.split(".")[1]))


def state_of(payload: Any) -> str:
    return "ds1." + b64(json.dumps(payload, separators=(",", ":")).encode())


def assert_error_shape(resp_status: int, data: Any) -> None:
    assert list(data) == ["error"] and list(data["error"]) == ["message", "type", "param", "code"], data
    assert data["error"]["code"] == resp_status


# ================================================================================================
# stream_state
# ================================================================================================

@pytest.fixture
async def clients(aiohttp_client, qwen3):
    return {"plain": await aiohttp_client(create_app(ServerConfig(), qwen3)),
            "parsed": await aiohttp_client(create_app(ServerConfig(**PARSERS), qwen3)),
            "signed": await aiohttp_client(create_app(ServerConfig(stream_state_secret="s3cret"), qwen3))}


async def call(client, path, body) -> tuple[int, Any]:
    resp = await client.post(path, json=body)
    data = await resp.json()
    if resp.status != 200:
        assert_error_shape(resp.status, data)
    return resp.status, data


async def first_state(client, path, key, request, ids=(9707, 11)) -> str:
    body = {"stream": True, "generate_chunk": chunk(list(ids)), "prompt_token_ids": PROMPT, key: request}
    status, data = await call(client, path, body)
    assert status == 200, data
    return data["stream_state"]


STATE_SCALARS = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([2**31, 2**63, 10**30, -2**40])
                 | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6))
STATE_VALUES = st.recursive(STATE_SCALARS, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


def _locations(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _locations(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _locations(v, (*prefix, i))
    return out


@st.composite
def forged(draw: st.DrawFn, payload: Any) -> Any:
    """The real payload with 1-3 values replaced or deleted at random places (what a forger tries)."""
    payload = json.loads(json.dumps(payload))
    for _ in range(draw(st.integers(1, 3))):
        locs = _locations(payload)
        if not locs:
            break
        loc = draw(st.sampled_from(locs))
        parent = payload
        for part in loc[:-1]:
            parent = parent[part]
        if draw(st.integers(0, 4)) == 0:
            del parent[loc[-1]]
        else:
            parent[loc[-1]] = draw(STATE_VALUES)
    return payload


CASES = [
    # (fixture, path, key, request, next chunk ids)
    ("plain", CHAT, "chat_request", {"messages": MESSAGES, "stop": [" wor"], "logprobs": True}, [1879, 0]),
    ("plain", CMPL, "completion_request", {"prompt": "x", "stop": ["ld!"], "logprobs": 2}, [1879, 0]),
    ("parsed", CHAT, "chat_request", {"messages": MESSAGES, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object"}}}]}, [151657, 198, 4913, 606]),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=["chat-plain", "completions", "chat-parsers"])
async def test_forged_state_payloads_are_200_or_400(clients, case):
    fixture, path, key, req, ids = CASES[case]
    client = clients[fixture]
    state = await first_state(client, path, key, req)
    payload = payload_of(state)
    # the real state continues fine
    status, data = await call(client, path, {"stream": True, "generate_chunk": chunk(ids), "stream_state": state,
                                             key: req})
    assert status == 200, data

    results: list[tuple[Any, int, Any]] = []

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(bad=forged(payload), finish=st.sampled_from([None, "stop", "length"]))
    def probe(bad, finish):
        body = {"stream": True, "generate_chunk": chunk(ids, finish), "stream_state": state_of(bad), key: req}
        results.append((bad, *asyncio.run_coroutine_threadsafe(call(client, path, body), loop).result(30)))

    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, probe)
    for bad, status, data in results:
        assert status in (200, 400), (bad, data)
        if status == 400:  # a forged output count may instead trip vLLM's max_model_len bound
            message = data["error"]["message"]
            assert message.startswith("invalid stream_state") or "exceeds max_model_len" in message, (bad, data)


async def test_replayed_foreign_and_truncated_states_are_400(clients):
    plain, parsed, signed = clients["plain"], clients["parsed"], clients["signed"]
    req = {"messages": MESSAGES}
    state = await first_state(plain, CHAT, "chat_request", req)
    cmpl_state = await first_state(plain, CMPL, "completion_request", {"prompt": "x"})
    signed_state = await first_state(signed, CHAT, "chat_request", req)
    tool_req = {"messages": MESSAGES, "tools": CASES[2][3]["tools"]}
    parsed_state = await first_state(parsed, CHAT, "chat_request", tool_req)

    async def refused(client, path, st, ids=(1879,), index=0, rid=RID, key="chat_request", request=req):
        status, data = await call(client, path, {"stream": True, "generate_chunk": chunk(list(ids), index=index,
                                                                                     rid=rid),
                                                  "stream_state": st, key: request})
        assert status == 400, (st, data)
        assert data["error"]["message"].startswith("invalid stream_state: "), data
        return data["error"]["message"]

    # another request's state (request ids differ), another choice's state, another endpoint's state
    assert "another request" in await refused(plain, CHAT, state, rid="generate-tokens-chatcmpl-ffffffffffffffff")
    assert "choice" in await refused(plain, CHAT, state, index=1)
    await refused(plain, CMPL, state, key="completion_request", request={"prompt": "x"})
    await refused(plain, CHAT, cmpl_state)
    # a server with another parser configuration, and the plain server fed a parser state
    await refused(parsed, CHAT, state, request=tool_req)
    await refused(plain, CHAT, parsed_state)
    # an unsigned (or re-signed) state on a signed server; a signed state with its body tampered
    await refused(signed, CHAT, state)
    head, body, sig = signed_state.split(".")
    payload = orjson.loads(unb64(body))
    payload["n"] = payload["n"] + 1
    await refused(signed, CHAT, f"{head}.{b64(orjson.dumps(payload))}.{sig}")
    # truncations at every length, and non-string states
    for cut in range(0, len(state), max(1, len(state) // 25)):
        await refused(plain, CHAT, state[:cut])
    for bad in [0, 1.5, True, [], {}, ["ds1."], {"stream_state": state}, "ds1." + "A" * 2_000_000]:
        await refused(plain, CHAT, bad)


async def test_prompt_ids_changing_between_calls(clients, qwen3):
    """Spec 0.3: prompt ids are needed on the first call only; later ones are accepted (and may differ)
    without changing the text, and are still bounds-checked against max_model_len."""
    plain = clients["plain"]
    ids = qwen3.tokenizer.encode(" Hello world, again")
    req = {"messages": MESSAGES}
    st0 = await first_state(plain, CHAT, "chat_request", req, ids=ids[:1])
    texts = []
    for other in (PROMPT, [0], None, list(range(5000))):
        status, data = await call(plain, CHAT, {"stream": True, "generate_chunk": chunk(ids[1:]), "stream_state": st0,
                                                "chat_request": req, "prompt_token_ids": other})
        assert status == 200, data
        texts.append(data["chunk"]["choices"][0]["delta"]["content"])
    assert len(set(texts)) == 1 and texts[0] == qwen3.tokenizer.decode(ids[1:])
    status, data = await call(plain, CHAT, {"stream": True, "generate_chunk": chunk(ids[1:]), "stream_state": st0,
                                            "chat_request": req, "prompt_token_ids": [0] * qwen3.max_model_len})
    assert status == 400 and "max_model_len" in data["error"]["message"], data


# ================================================================================================
# the front door with the official client
# ================================================================================================

REPLIES = ["Alpha beta gamma delta epsilon.", "Beta gamma delta alpha zeta.", "Gamma delta."]


@pytest.fixture(scope="module")
def door(qwen3):
    stack = Stack(qwen3)
    yield stack
    stack.close()



def engine_token_ids(stack: Stack) -> list[list[int]]:
    return [list(r.get("token_ids") or []) for r in stack.engine_state.received]


def test_completions_empty_prompt_list_is_400(door):
    status, _, text = post_raw(door.url + "/v1/completions", {"model": "tiny-qwen3", "prompt": [], "max_tokens": 2})
    assert status == 400, text
    assert json.loads(text)["error"]["message"] == "You must pass at least one prompt (parameter=prompt)"


def test_completions_render_empty_prompt_list_is_400(door):
    status, _, text = post_raw(door.url + "/v1/completions/render", {"prompt": []})
    assert status == 400, text
    assert json.loads(text)["error"]["message"] == "You must pass at least one prompt (parameter=prompt)"


@pytest.mark.parametrize("stream", [False, True])
def test_echo_with_max_tokens_0_returns_only_the_prompt(door, stream):
    door.set_replies(REPLIES[:1])
    c = door.client()
    r = c.completions.create(model="tiny-qwen3", prompt="Hello there", max_tokens=0, echo=True, stream=stream)
    if stream:
        text = "".join(ch.choices[0].text for ch in r if ch.choices)
    else:
        text = r.choices[0].text
    assert door.last_engine_request()["sampling_params"]["max_tokens"] == 1  # docs/vllm-wire-spec.md §2.2: the engine gets 1
    assert text == "Hello there"


@pytest.mark.parametrize("bad_id", [151669 + 400, 2**31, 2**32 + 5, 2**63])
def test_prompt_ids_past_the_vocab_never_reach_the_engine(door, qwen3, bad_id):
    door.set_replies(REPLIES[:1])
    before = len(door.engine_state.received)
    status, _, text = post_raw(door.url + "/v1/completions",
                               {"model": "tiny-qwen3", "prompt": [9707, bad_id], "max_tokens": 2})
    sent = list(door.engine_state.received)[before:]
    assert not sent, f"the engine received {[r['token_ids'] for r in sent]}"
    assert status == 400, text
    assert json.loads(text)["error"]["message"] == f"Token id {bad_id} is out of vocabulary"


def test_prompt_ids_inside_the_model_vocab_are_accepted_like_vllm(door, qwen3):
    assert qwen3.hf_config["vocab_size"] - 1 > qwen3.tokenizer.max_token_id
    door.set_replies(REPLIES[:1])
    status, _, text = post_raw(door.url + "/v1/completions",
                               {"model": "tiny-qwen3", "prompt": [9707, qwen3.hf_config["vocab_size"] - 1],
                                "max_tokens": 2})
    assert status == 200, text


def test_max_tokens_1_and_length(door):
    door.set_replies(REPLIES[:1])
    c = door.client()
    r = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, max_tokens=1)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 1
    assert r.choices[0].message.content == "Alpha"
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, max_tokens=1, stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "Alpha"
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "length"
    r = c.completions.create(model="tiny-qwen3", prompt="x", max_tokens=1)
    assert r.choices[0].text == "Alpha" and r.choices[0].finish_reason == "length"


@pytest.mark.parametrize("k", [0, 5, 20])
def test_top_logprobs_edges(door, k):
    door.set_replies(REPLIES[:1])
    c = door.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True, top_logprobs=k, max_tokens=4)
    assert [len(e.top_logprobs) for e in full.choices[0].logprobs.content] == [k] * 4
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True, top_logprobs=k,
                                            max_tokens=4, stream=True))
    streamed = [e for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert [(e.token, e.logprob, [t.token for t in e.top_logprobs]) for e in streamed] == \
           [(e.token, e.logprob, [t.token for t in e.top_logprobs]) for e in full.choices[0].logprobs.content]
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True, top_logprobs=21)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_n3_with_stop_strings_stream_equals_non_stream(door, api):
    door.set_replies(REPLIES)
    c = door.client()
    stop = [" delta", "ta"]
    if api == "chat":
        full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, n=3, stop=stop)
        whole = {ch.index: (ch.message.content, ch.finish_reason, ch.model_extra["stop_reason"]) for ch in full.choices}
        agg: dict[int, list] = {}
        for ch in c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, n=3, stop=stop, stream=True):
            for x in ch.choices:
                a = agg.setdefault(x.index, ["", None, None])
                a[0] += x.delta.content or ""
                if x.finish_reason:
                    a[1], a[2] = x.finish_reason, x.model_extra["stop_reason"]
    else:
        full = c.completions.create(model="tiny-qwen3", prompt="x", n=3, stop=stop)
        whole = {ch.index: (ch.text, ch.finish_reason, ch.model_extra["stop_reason"]) for ch in full.choices}
        agg = {}
        for ch in c.completions.create(model="tiny-qwen3", prompt="x", n=3, stop=stop, stream=True):
            for x in ch.choices:
                a = agg.setdefault(x.index, ["", None, None])
                a[0] += x.text
                if x.finish_reason:
                    a[1], a[2] = x.finish_reason, x.model_extra["stop_reason"]
    assert sorted(whole.values()) == sorted([("Alpha be", "stop", "ta"), ("Be", "stop", "ta"),
                                             ("Gamma", "stop", " delta")])
    assert {i: tuple(v) for i, v in agg.items()} == whole


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "other", "parameters": {"type": "object", "properties": {}}}}]
TOOL_REPLY = "<think>\nhmm\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"


@pytest.fixture(scope="module")
def tool_door(qwen3):
    stack = Stack(qwen3, **PARSERS)
    yield stack
    stack.close()


@pytest.mark.parametrize("tool_choice,finish,calls", [
    ("required", "tool_calls", [("get_weather", {"city": "Paris"})]),
    ({"type": "function", "function": {"name": "get_weather"}}, "stop", [("get_weather", {"city": "Paris"})]),
    ("none", "stop", []),
    ("auto", "tool_calls", [("get_weather", {"city": "Paris"})]),
], ids=["required", "named", "none", "auto"])
def test_tool_choice_variants_stream_equals_non_stream(tool_door, tool_choice, finish, calls):
    tool_door.set_replies([TOOL_REPLY])
    c = tool_door.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS, tool_choice=tool_choice)
    msg = full.choices[0].message
    assert full.choices[0].finish_reason == finish
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls or []] == calls
    assert msg.model_extra["reasoning"] == "\nhmm\n"
    streamed: dict[int, dict] = {}
    content, last_finish = "", None
    for ch in c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS, tool_choice=tool_choice,
                                        stream=True):
        for x in ch.choices:
            content += x.delta.content or ""
            for t in x.delta.tool_calls or []:
                slot = streamed.setdefault(t.index, {"id": None, "name": "", "args": ""})
                slot["id"] = slot["id"] or t.id
                slot["name"] += (t.function.name or "") if t.function else ""
                slot["args"] += (t.function.arguments or "") if t.function else ""
            last_finish = x.finish_reason or last_finish
    assert last_finish == finish
    assert [(s["name"], json.loads(s["args"])) for s in streamed.values()] == calls
    assert content == (msg.content or "")
    assert all(s["id"].startswith("chatcmpl-tool-") for s in streamed.values())
    if tool_choice == "none":
        assert "<tool_call>" in msg.content  # passed through as content


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
def test_50_concurrent_streams_with_cancellations(door):
    """Bounded concurrency through the async client; every third stream is cancelled mid-stream.
    Finished streams are complete and equal to the reply; cancelled ones are aborted at the engine."""
    reply = " ".join(f"w{i}" for i in range(40))
    door.set_replies([reply], token_delay_ms=3)
    before = len(door.engine_state.aborted)

    async def one(c: openai.AsyncOpenAI, i: int) -> tuple[str, bool, str]:
        stream = await c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True,
                                                 max_tokens=400, extra_headers={"X-Request-Id": f"qa-{i}"})
        text = ""
        async for chunk in stream:
            text += "".join(x.delta.content or "" for x in chunk.choices)
            if i % 3 == 0 and len(text) > 10:
                await stream.close()
                return text, True, chunk.id
        return text, False, ""

    async def run() -> list[tuple[str, bool, str]]:
        c = door.async_client()
        try:
            return await asyncio.gather(*(one(c, i) for i in range(50)))
        finally:
            await c.close()

    results = asyncio.run(run())
    for text, cancelled, _ in results:
        if not cancelled:
            assert text == reply
    cancelled = sum(1 for _, c, _ in results if c)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and len({a["request_id"] for a in door.engine_state.aborted[before:]}) < cancelled:
        time.sleep(0.01)
    aborted = {a["request_id"].rsplit("-", 1)[0] for a in door.engine_state.aborted[before:]}
    assert {f"generate-tokens-chatcmpl-qa-{i}" for i in range(0, 50, 3)} <= aborted, sorted(aborted)
    door.set_replies(REPLIES)
    # the proxy is still healthy and serves the next request normally
    assert door.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES,
                                                     max_tokens=2).choices[0].message.content == "Alpha beta"


def metric_lines(url: str, name: str) -> list[str]:
    import urllib.request

    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return [line for line in text.splitlines() if line.startswith(name)]


def test_mid_stream_disconnects_are_never_500s(qwen3, caplog):
    stack = Stack(qwen3)
    try:
        stack.set_replies([" ".join(f"w{i}" for i in range(60))], token_delay_ms=2)

        async def one(c: openai.AsyncOpenAI) -> None:
            stream = await c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True,
                                                     max_tokens=400)
            seen = 0
            # leave the loop, then close (closing from inside the loop body leaves the SDK's
            # iterator suspended mid-read until the event loop finalizes it)
            async for _ in stream:
                seen += 1
                if seen == 4:
                    break
            await stream.close()

        async def run() -> None:
            c = stack.async_client()
            try:
                for _ in range(3):
                    await asyncio.gather(*(one(c) for _ in range(20)))
            finally:
                await c.close()

        asyncio.run(run())
        time.sleep(0.3)
        lines = metric_lines(stack.url, "derender_proxy_requests_total{")
        disconnects = sum(float(line.rsplit(" ", 1)[1]) for line in lines if 'route="/v1/chat/completions"' in line)
        assert disconnects == 60, lines
        assert not [line for line in lines if 'status="500"' in line], lines
        # a client that left is no server error, whichever way the proxy found out (its handler
        # cancelled, or a write to the closed socket): nothing logged as an error, no engine
        # counted as failing, every engine request aborted as a disconnect
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
        assert not [line for line in metric_lines(stack.url, "derender_proxy_engine_errors_total{")
                    if not line.endswith(" 0.0")]
        aborts = metric_lines(stack.url, "derender_proxy_aborts_total{")
        assert [line for line in aborts if 'cause="client_disconnect"' in line], aborts
        assert not [line for line in aborts if 'cause="client_disconnect"' not in line], aborts
    finally:
        stack.close()


def test_long_prompts_do_not_block_other_requests(door, qwen3, capsys):
    """~30k-token chats render while small requests keep flowing. Timings are reported, not asserted
    (shared CI machines); correctness is: every request answers, the long ones with all their ids."""
    import statistics

    door.set_replies(["ok"])
    words = " ".join(f"word{i % 997} 東京{i % 13}" for i in range(3700))
    long_body = {"messages": [{"role": "user", "content": words}], "max_tokens": 2}
    small = {"messages": MESSAGES, "max_tokens": 2}
    report = []
    for path in ["/v1/chat/completions/render", "/v1/chat/completions"]:
        status, _, text = post_raw(door.url + path, long_body, timeout=60)
        assert status == 200, text[:300]
        if path.endswith("render"):
            assert len(json.loads(text)["token_ids"]) > 29_000
        else:
            assert json.loads(text)["usage"]["prompt_tokens"] > 29_000

        def timed(body: dict) -> float:
            t0 = time.perf_counter()
            status, _, text = post_raw(door.url + path, body, timeout=60)
            assert status == 200, text[:300]
            return (time.perf_counter() - t0) * 1000

        alone = [timed(small) for _ in range(20)]
        stop, longs = threading.Event(), []

        def hammer() -> None:
            while not stop.is_set():
                longs.append(timed(long_body))

        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.1)
        during = [timed(small) for _ in range(20)]
        stop.set()
        for t in threads:
            t.join()
        q = lambda xs: f"p50 {statistics.median(xs):.1f} / max {max(xs):.1f} ms"  # noqa: E731
        report.append(f"{path}: small alone {q(alone)}; small during 2 long loops {q(during)}; "
                      f"long {q(longs)} (n={len(longs)})")
    with capsys.disabled():
        print("\n[QA latency] " + "\n[QA latency] ".join(report))


# ================================================================================================
# auth and metrics interplay
# ================================================================================================

async def test_auth_cannot_be_bypassed_by_path_tricks_and_open_routes_stay_open(aiohttp_client, qwen3):
    client = await aiohttp_client(create_app(ServerConfig(api_key="sekret", max_request_bytes=2000), qwen3))
    for path in ["/health/", "/health/../v1/models", "/metrics/../v1/models", "/v1/models",
                 "/v1/models/", "/HEALTH", "/tokenize", "/version"]:
        resp = await client.get(path, headers={"Authorization": "Bearer wrong"})
        assert resp.status == 401, path
        assert_error_shape(401, await resp.json())
        assert resp.headers["WWW-Authenticate"] == "Bearer"
    for path in ["/health", "/metrics", "/%68ealth"]:
        assert (await client.get(path)).status == 200, path
    # an oversized body without a key is a 401 (nothing is read); with the key, a 413 error body
    big = {"messages": [{"role": "user", "content": "x" * 5000}]}
    resp = await client.post("/v1/chat/completions/render", json=big)
    assert resp.status == 401
    resp = await client.post("/v1/chat/completions/render", json=big, headers={"Authorization": "Bearer sekret"})
    assert resp.status == 413
    assert_error_shape(413, await resp.json())
    text = await (await client.get("/metrics")).text()
    lines = [line for line in text.splitlines() if line.startswith("derender_proxy_requests_total{")]
    assert any('status="401"' in line for line in lines) and any('status="413"' in line for line in lines), lines
    # label cardinality stays bounded whatever paths a client invents
    routes = {line.split('route="')[1].split('"')[0] for line in lines}
    assert not any("HEALTH" in r or ".." in r for r in routes), routes


# ================================================================================================
# parser path: special-token text (found by differential fuzzing against vLLM 0.33 on :8110)
# ================================================================================================

# (name, output text pieces, chat_request extras, vLLM 0.33's answer recorded from its derender on
# 127.0.0.1:8110 with hermes + qwen3: {content, reasoning, tool call arguments}).
# vLLM's parser engine drops the text of EVERY tokenizer special token that is not one of its markers
# (vllm/parser/engine/streaming_parser_engine.py _build_drop_info over tokenizer.all_special_tokens);
# so do we (core/parsers/special.py, applied by the pipeline for the engine-based families).
SPECIAL_CASES = [
    ("content_endoftext", ["<think>\nr\n</think>\n\nA", 151643, "B"], {}, ("\n\nAB", "\nr\n", None)),
    ("content_box", ["<think>\nr\n</think>\n\nA", 151648, "B"], {}, ("\n\nAB", "\nr\n", None)),
    ("reasoning_box", ["<think>\nr", 151648, "s\n</think>\n\nC"], {}, ("\n\nC", "\nrs\n", None)),
    ("tool_args_box", ["<think>\nr\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"x", 151648,
                       "y\"}}\n</tool_call>"], {"tools": CASES[2][3]["tools"]}, (None, "\nr\n", '{"a": "xy"}')),
]


@pytest.mark.parametrize("case", range(len(SPECIAL_CASES)), ids=[c[0] for c in SPECIAL_CASES])
async def test_special_token_text_never_reaches_parsed_output(clients, qwen3, case):
    _, pieces, extra, (content, reasoning, args) = SPECIAL_CASES[case]
    ids = [i for p in pieces for i in ([p] if isinstance(p, int) else qwen3.tokenizer.encode(p))]
    request = {"messages": MESSAGES, **extra}
    status, data = await call(clients["parsed"], CHAT, {
        "prompt_token_ids": PROMPT, "chat_request": request, "generate_response": {
            "request_id": RID, "choices": [{"index": 0, "finish_reason": "length", "stop_reason": None,
                                            "token_ids": ids}]}})
    assert status == 200, data
    message = data["choices"][0]["message"]
    got_args = message["tool_calls"][0]["function"]["arguments"] if message.get("tool_calls") else None
    assert (message["content"], message["reasoning"], got_args) == (content, reasoning, args)


# ================================================================================================
# a misbehaving engine: the client always gets an answer (never a 500, never a hang)
# ================================================================================================

ENGINE_FAULTS = {
    "not_json": [b"data: {not json\n\n", b"data: [DONE]\n\n"],
    "bad_index": [b'data: {"request_id":"r","choices":[{"index":7,"finish_reason":null,"token_ids":[9707]}]}\n\n',
                  b"data: [DONE]\n\n"],
    "string_ids": [b'data: {"request_id":"r","choices":[{"index":0,"finish_reason":null,"token_ids":["a"]}]}\n\n',
                   b"data: [DONE]\n\n"],
    "null_choices": [b'data: {"request_id":"r","choices":null}\n\n', b"data: [DONE]\n\n"],
    "not_an_object": [b"data: [1, 2]\n\n", b"data: [DONE]\n\n"],
    "ids_past_vocab": [b'data: {"request_id":"r","choices":[{"index":0,"finish_reason":null,'
                       b'"token_ids":[9707,1099511627776,151800]}]}\n\n',
                       b'data: {"request_id":"r","choices":[{"index":0,"finish_reason":"stop","stop_reason":151645,'
                       b'"token_ids":[151645]}]}\n\n', b"data: [DONE]\n\n"],
    "no_done": [b'data: {"request_id":"r","choices":[{"index":0,"finish_reason":null,"token_ids":[9707]}]}\n\n'],
    "finish_error": [b'data: {"request_id":"r","choices":[{"index":0,"finish_reason":"error","token_ids":[]}]}\n\n',
                     b"data: [DONE]\n\n"],
}
ENGINE_FULL = {
    "not_json": b"{not json",
    "string_ids": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"stop","token_ids":["a"]}]}',
    "null_choices": b'{"request_id":"r","choices":null}',
    "not_an_object": b"[1, 2]",
    "ids_past_vocab": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"length","token_ids":[9707,1099511627776]}]}',
    "finish_error": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"error","token_ids":[]}]}',
}


def hostile_engine_app(fault: dict[str, str]):
    from aiohttp import web

    async def generate(request):
        body = await request.json()
        name = fault["name"]
        if not body.get("stream"):
            return web.Response(body=ENGINE_FULL.get(name, ENGINE_FULL["not_json"]), content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for event in ENGINE_FAULTS[name]:
            await resp.write(event)
        await resp.write_eof()
        return resp

    async def ok(request):
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/inference/v1/generate", generate)
    app.router.add_post("/inference/v1/abort_requests", ok)
    app.router.add_get("/health", ok)
    return app


@pytest.fixture(scope="module")
def hostile(qwen3):
    from tests.proxy.loopback import LoopbackServer

    fault = {"name": "not_json"}
    engine = LoopbackServer(lambda: hostile_engine_app(fault)).start()
    config = ServerConfig(engine_url=[engine.url], health_check_interval=0, engine_idle_timeout=3,
                          engine_first_token_timeout=3)
    proxy = LoopbackServer(lambda: create_app(config, qwen3)).start()
    yield proxy, fault
    proxy.stop()
    engine.stop()


def _misbehaving_params():
    out = []
    for api in ("chat", "completions"):
        for stream in (False, True):
            for name in sorted(ENGINE_FAULTS):
                out.append(pytest.param(name, stream, api,
                                        id=f"{api}-{'stream' if stream else 'full'}-{name}"))
    return out


@pytest.mark.parametrize("name,stream,api", _misbehaving_params())
def test_misbehaving_engine_never_500_never_hangs(hostile, name, stream, api):
    proxy, fault = hostile
    fault["name"] = name
    path, body = (("/v1/chat/completions", {"messages": MESSAGES}) if api == "chat"
                  else ("/v1/completions", {"prompt": "hi"}))
    body = {**body, "stream": stream, "max_tokens": 5}
    t0 = time.monotonic()
    status, headers, text = post_raw(proxy.url + path, body, timeout=8)
    assert time.monotonic() - t0 < 6
    assert status < 500 or status in (502, 503, 504), (status, text[:400])
    if status != 200:
        assert_error_shape(status, json.loads(text))
        return
    if headers["content-type"].startswith("text/event-stream"):
        events = text.split("\n\n")
        assert events[-2:] == ["data: [DONE]", ""], text[-400:]
        for event in events[:-2]:
            payload = json.loads(event[len("data: "):])
            if "error" in payload:
                assert payload["error"]["code"] != 500 or name == "finish_error", payload
    else:
        json.loads(text)


@pytest.mark.parametrize("stream", [False, True])
def test_echo_with_logprobs_covers_the_prompt_and_offsets_match_the_text(door, qwen3, stream):
    door.set_replies(REPLIES[:1])
    c = door.client()
    prompt = "Hello there"
    r = c.completions.create(model="tiny-qwen3", prompt=prompt, echo=True, max_tokens=3, logprobs=1, stream=stream)
    text, tokens, offsets = "", [], []
    for choice in ([ch.choices[0] for ch in r if ch.choices] if stream else [r.choices[0]]):
        text += choice.text
        if choice.logprobs:
            tokens += choice.logprobs.tokens
            offsets += choice.logprobs.text_offset
    assert text.startswith(prompt)
    assert "".join(tokens) == text  # every echoed and generated token is accounted for
    for token, offset in zip(tokens, offsets):
        assert text[offset:offset + len(token)] == token, (token, offset, text)


def _oracle_engine_up() -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen("http://127.0.0.1:8200/health", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.mark.oracle
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_prompt_logprobs_reach_the_client_through_the_real_engine(qwen3, api):
    if not _oracle_engine_up():
        pytest.skip("vLLM oracle engine (127.0.0.1:8200) is not running")
    from tests.proxy.loopback import LoopbackServer

    config = ServerConfig(engine_url=["http://127.0.0.1:8200"], health_check_interval=0)
    proxy = LoopbackServer(lambda: create_app(config, qwen3)).start()
    try:
        if api == "completions":
            body = {"prompt": "Hello world, again", "max_tokens": 2, "prompt_logprobs": 1, "temperature": 0}
            status, _, text = post_raw(proxy.url + "/v1/completions", body, timeout=120)
            assert status == 200, text
            got = json.loads(text)["choices"][0]["prompt_logprobs"]
            n_prompt = len(qwen3.tokenizer.encode("Hello world, again"))
        else:
            body = {"messages": MESSAGES, "max_tokens": 2, "prompt_logprobs": 1, "temperature": 0}
            status, _, text = post_raw(proxy.url + "/v1/chat/completions", body, timeout=120)
            assert status == 200, text
            data = json.loads(text)
            got = data["prompt_logprobs"]
            n_prompt = data["usage"]["prompt_tokens"]
        assert isinstance(got, list) and len(got) == n_prompt and got[0] is None, got
    finally:
        proxy.stop()


async def test_many_short_messages_do_not_stall_the_event_loop(clients):
    client = clients["plain"]
    body = {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": ""} for i in range(5000)]}
    await client.post("/v1/chat/completions/render", json={"messages": body["messages"][:3]})  # warm the template
    resp, elapsed, gaps = await watch_loop(client.post("/v1/chat/completions/render", json=body))
    assert resp.status == 200
    assert_loop_kept_running(gaps, elapsed)


async def test_large_logprob_derender_does_not_stall_the_event_loop(clients, qwen3):
    client = clients["plain"]
    ids = qwen3.tokenizer.encode(" the quick brown fox 世界 🎉" * 250)[:2000]
    logprobs = {"content": [{"token_id": t, "logprob": -1.0, "rank": 1, "top_logprobs": [
        {"token_id": (t + k) % 150000, "logprob": -1.0 - k, "rank": k + 1} for k in range(20)]} for t in ids]}
    body = {"chat_request": {"messages": MESSAGES, "logprobs": True, "top_logprobs": 20}, "prompt_token_ids": PROMPT,
            "generate_response": {"request_id": RID, "choices": [{"index": 0, "finish_reason": "length",
                                                                  "token_ids": ids, "logprobs": logprobs}]}}
    raw = json.dumps(body)
    resp, elapsed, gaps = await watch_loop(client.post(CHAT, data=raw, headers={"Content-Type": "application/json"}))
    assert resp.status == 200, await resp.text()
    assert len((await resp.json())["choices"][0]["logprobs"]["content"]) == len(ids)
    # work offloaded to the pool still shares the GIL, but the loop then runs every few ms
    assert_loop_kept_running(gaps, elapsed)
