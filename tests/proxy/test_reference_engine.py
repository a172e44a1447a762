"""The reference engine speaks vLLM's tokens-only protocol (docs/vllm-wire-spec.md §2.3), over real HTTP."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from core.reference_engine import ReplyBook, parse_replies
from proxy.reference_engine import REFERENCE, Faults, create_reference_app

IM_END = 151645
REPLY = "<think>\nshort\n</think>\n\nHello there, world!"

STREAM_CHOICE_KEYS = ["index", "finish_reason", "stop_reason", "token_ids", "routed_experts", "sampling_mask",
                      "weight_versions", "logprobs"]
RESPONSE_KEYS = ["request_id", "model", "created", "usage", "prompt_logprobs", "prompt_token_id_logprobs",
                 "prompt_token_ids", "mm_placeholders", "metrics", "kv_transfer_params", "ec_transfer_params",
                 "output_mode", "choices"]


@pytest.fixture
def make_engine(aiohttp_client, qwen3):
    async def make(replies=(REPLY,), **kwargs):
        book = ReplyBook(qwen3, [(r, None) for r in replies])
        return await aiohttp_client(create_reference_app(qwen3, replies=book, **kwargs))
    return make


async def read_sse(resp) -> list:
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    raw = (await resp.read()).decode()
    assert raw.endswith("data: [DONE]\n\n")
    parts = raw.split("\n\n")
    assert parts[-1] == "" and parts[-2] == "data: [DONE]"
    events = []
    for part in parts[:-2]:
        assert part.startswith("data: ")
        events.append(orjson.loads(part[len("data: "):]))
    return events


def body(prompt=(1, 2, 3), **sampling):
    return {"token_ids": list(prompt), "sampling_params": sampling}


async def test_non_streaming_shape_and_eos(make_engine, qwen3):
    client = await make_engine()
    resp = await client.post("/inference/v1/generate", json={**body(), "request_id": "abc"})
    assert resp.status == 200
    data = await resp.json()
    assert list(data) == RESPONSE_KEYS
    assert data["request_id"] == "generate-tokens-abc"
    assert data["output_mode"] == "tokens"
    (choice,) = data["choices"]
    assert list(choice) == STREAM_CHOICE_KEYS
    # the EOS id is inside token_ids and is the stop_reason (as the vLLM engine reports it)
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == IM_END
    assert choice["token_ids"][-1] == IM_END
    assert qwen3.tokenizer.decode(choice["token_ids"][:-1]) == REPLY
    n = len(choice["token_ids"])
    assert data["usage"] == {"prompt_tokens": 3, "total_tokens": 3 + n, "completion_tokens": n,
                             "prompt_tokens_details": None, "completion_tokens_details": None}


async def test_x_request_id_header_names_the_engine_request(make_engine):
    client = await make_engine()
    resp = await client.post("/inference/v1/generate", json={**body(), "request_id": "abc"},
                             headers={"X-Request-Id": "hdr"})
    assert (await resp.json())["request_id"] == "generate-tokens-hdr"


async def test_stream_equals_non_stream_with_usage_events(make_engine):
    client = await make_engine()
    full = await (await client.post("/inference/v1/generate", json=body())).json()
    resp = await client.post("/inference/v1/generate", json={
        **body(), "stream": True, "return_token_ids": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    events = await read_sse(resp)
    *token_events, last = events
    # usage-only last event, dumped with exclude_none
    total = len(full["choices"][0]["token_ids"])
    assert last == {"request_id": last["request_id"], "output_mode": "tokens", "choices": [],
                    "usage": {"prompt_tokens": 3, "total_tokens": 3 + total, "completion_tokens": total}}
    assert list(last) == ["request_id", "usage", "output_mode", "choices"]
    ids = []
    for i, event in enumerate(token_events):
        assert len(event["choices"]) == 1
        assert list(event["choices"][0]) == STREAM_CHOICE_KEYS
        # prompt_token_ids only on the first event; metrics / mm_placeholders left out
        assert ("prompt_token_ids" in event) == (i == 0)
        assert "metrics" not in event and "mm_placeholders" not in event
        ids += event["choices"][0]["token_ids"]
        assert event["usage"]["completion_tokens"] == len(ids)  # continuous usage is cumulative
    assert token_events[0]["prompt_token_ids"] == [1, 2, 3]
    assert list(token_events[0]) == ["request_id", "usage", "prompt_token_ids", "output_mode", "choices"]
    assert ids == full["choices"][0]["token_ids"]
    assert [e["choices"][0]["finish_reason"] for e in token_events[:-1]] == [None] * (len(token_events) - 1)
    assert token_events[-1]["choices"][0]["finish_reason"] == "stop"
    assert token_events[-1]["choices"][0]["stop_reason"] == IM_END


async def test_stream_without_usage_has_null_usage_and_no_usage_event(make_engine):
    client = await make_engine()
    events = await read_sse(await client.post("/inference/v1/generate", json={**body(), "stream": True}))
    assert all(e["usage"] is None and len(e["choices"]) == 1 for e in events)


async def test_n_greater_than_one_interleaves_indexes(make_engine):
    client = await make_engine(replies=("one two three", "alpha beta", "x"))
    events = await read_sse(await client.post("/inference/v1/generate",
                                              json={**body(n=3), "stream": True}))
    indexes = [e["choices"][0]["index"] for e in events]
    assert set(indexes) == {0, 1, 2}
    assert indexes != sorted(indexes)  # interleaved, not one choice after another
    full = await (await client.post("/inference/v1/generate", json=body(n=3))).json()
    for choice in full["choices"]:
        streamed = [t for e in events if e["choices"][0]["index"] == choice["index"]
                    for t in e["choices"][0]["token_ids"]]
        assert streamed == choice["token_ids"]
    assert len({tuple(c["token_ids"]) for c in full["choices"]}) == 3


async def test_max_tokens_min_tokens_stop_token_ids_ignore_eos(make_engine, qwen3):
    client = await make_engine()
    reply_ids = qwen3.tokenizer.encode(REPLY)

    async def choice(**sp):
        return (await (await client.post("/inference/v1/generate", json=body(**sp))).json())["choices"][0]

    c = await choice(max_tokens=4)
    assert (c["finish_reason"], c["stop_reason"], c["token_ids"]) == ("length", None, reply_ids[:4])
    stop_at = next(i for i, t in enumerate(reply_ids) if t not in reply_ids[:i] and i >= 3)
    c = await choice(stop_token_ids=[reply_ids[stop_at]])
    assert (c["finish_reason"], c["stop_reason"], c["token_ids"]) == (
        "stop", reply_ids[stop_at], reply_ids[:stop_at + 1])
    # stop ids cannot be sampled before min_tokens (vLLM masks them): the reply goes on
    c = await choice(min_tokens=len(reply_ids) + 2, max_tokens=3 * len(reply_ids))
    assert (c["finish_reason"], c["stop_reason"]) == ("stop", IM_END)
    assert c["token_ids"] == reply_ids + reply_ids + [IM_END]
    # a forcing logit_bias emits that token (how the oracle recordings force EOS)
    c = await choice(logit_bias={str(IM_END): 100}, min_tokens=3)
    assert (c["finish_reason"], c["stop_reason"], c["token_ids"]) == ("stop", IM_END, reply_ids[:3] + [IM_END])
    c = await choice(ignore_eos=True, max_tokens=2 * len(reply_ids) + 4)
    assert c["finish_reason"] == "length" and len(c["token_ids"]) == 2 * len(reply_ids) + 4
    # without max_tokens the engine allows max_model_len - prompt_len
    c = await choice(ignore_eos=True)
    assert c["finish_reason"] == "length" and len(c["token_ids"]) == qwen3.max_model_len - 3


async def test_logprobs_0_33_shape(make_engine):
    client = await make_engine()
    data = await (await client.post("/inference/v1/generate", json=body(logprobs=2))).json()
    choice = data["choices"][0]
    content = choice["logprobs"]["content"]
    assert [e["token_id"] for e in content] == choice["token_ids"]
    sizes = set()
    for entry in content:
        assert list(entry) == ["token_id", "logprob", "rank", "top_logprobs"]
        top = entry["top_logprobs"]
        assert top[0] == {"token_id": entry["token_id"], "logprob": entry["logprob"], "rank": entry["rank"]}
        assert [t["rank"] for t in top[1:]] == sorted(t["rank"] for t in top[1:])
        sizes.add(len(top))
    assert sizes == {2, 3}  # k when the sampled token is in the top k, k+1 when it is not
    events = await read_sse(await client.post("/inference/v1/generate", json={**body(logprobs=2), "stream": True}))
    assert [e["choices"][0]["logprobs"]["content"][0] for e in events] == content


@pytest.mark.parametrize("payload,status,fragment", [
    (body(stop=["x"]), 400, "stop strings are not supported on a --tokens-only server"),
    ({"token_ids": [], "sampling_params": {}}, 400, "token_ids"),
    ({"token_ids": [-1], "sampling_params": {}}, 400, "non-negative"),
    ({"token_ids": [1]}, 400, "sampling_params"),
    ({**body(), "output_mode": "text"}, 400, "requires a tokenizer"),
    ({**body(), "model": "nope"}, 404, "The model `nope` does not exist"),
    (body(max_tokens=0), 400, "max_tokens must be at least 1"),
    (body(temperature=3), 400, "temperature"),
    (body(top_p=0), 400, "top_p"),
    (body(logprobs=21), 400, "greater than max allowed: 20"),
    (body(min_tokens=5, max_tokens=2), 400, "min_tokens"),
    (body(n=0), 400, "n must be at least 1"),
    ({"token_ids": [10**7], "sampling_params": {}}, 400, "out of vocabulary"),
])
async def test_validation_errors(make_engine, payload, status, fragment):
    client = await make_engine()
    resp = await client.post("/inference/v1/generate", json=payload)
    assert resp.status == status
    err = (await resp.json())["error"]
    assert fragment in err["message"] and err["code"] == status


async def test_abort_requests_ends_stream_with_abort(make_engine):
    client = await make_engine(token_delay_ms=20)
    engine = client.app[REFERENCE]
    resp = await client.post("/inference/v1/generate", json={**body(), "stream": True, "request_id": "r1",
                                                             "stream_options": {"include_usage": True}})
    first = await resp.content.readuntil(b"\n\n")
    assert orjson.loads(first[6:])["choices"][0]["token_ids"]
    abort = await client.post("/inference/v1/abort_requests", json={"request_ids": ["generate-tokens-r1"]})
    assert abort.status == 200 and await abort.read() == b""
    rest = (await resp.read()).decode().split("\n\n")
    events = [orjson.loads(p[6:]) for p in rest if p.startswith("data: {")]
    assert rest[-2] == "data: [DONE]"
    terminal = events[-2]["choices"][0]
    assert (terminal["finish_reason"], terminal["token_ids"]) == ("abort", [])
    assert events[-1]["choices"] == []  # the usage event still closes the stream
    assert engine.aborted[0]["request_id"] == "generate-tokens-r1"
    assert engine.aborted[0]["via"] == "abort_requests"


async def test_legacy_abort_route_and_missing_ids(make_engine):
    client = await make_engine(api_key="k")
    assert (await client.post("/abort_requests", json={"request_ids": ["generate-tokens-x"]})).status == 200
    resp = await client.post("/inference/v1/abort_requests", json={"request_ids": ["y"]})
    assert resp.status == 401  # /inference is guarded by the API key, the legacy path is not
    resp = await client.post("/abort_requests", json={})
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == "Missing 'request_ids' in request body"
    listed = await (await client.get("/debug/aborted")).json()
    assert [a["request_id"] for a in listed] == ["generate-tokens-x"]


async def test_client_disconnect_is_recorded(make_engine):
    client = await make_engine(token_delay_ms=10)
    engine = client.app[REFERENCE]
    resp = await client.post("/inference/v1/generate", json={**body(), "stream": True, "request_id": "gone"})
    await resp.content.readuntil(b"\n\n")
    closed_at = time.monotonic()
    resp.close()
    for _ in range(100):
        if engine.aborted:
            break
        await asyncio.sleep(0.005)
    assert engine.aborted[0]["request_id"] == "generate-tokens-gone"
    assert engine.aborted[0]["via"] == "disconnect"
    assert engine.aborted[0]["time"] - closed_at < 0.1


async def test_fault_fail_status(make_engine):
    client = await make_engine(faults=Faults(fail_status=503))
    resp = await client.post("/inference/v1/generate", json=body())
    assert resp.status == 503
    assert (await resp.json())["error"]["code"] == 503
    # faults change at run time
    await client.post("/debug/faults", json={"fail_status": 0})
    assert (await client.post("/inference/v1/generate", json=body())).status == 200


async def test_fault_drop_after_cuts_without_done(make_engine):
    client = await make_engine(faults=Faults(drop_after=3))
    resp = await client.post("/inference/v1/generate", json={**body(), "stream": True})
    raw = b""
    with pytest.raises(Exception):
        async for chunk in resp.content.iter_any():
            raw += chunk
    assert raw.count(b"data: {") == 3 and b"[DONE]" not in raw


async def test_fault_stall_after_then_abort(make_engine):
    client = await make_engine(faults=Faults(stall_after=2))
    resp = await client.post("/inference/v1/generate", json={**body(), "stream": True, "request_id": "s"})
    await resp.content.readuntil(b"\n\n")
    await resp.content.readuntil(b"\n\n")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 0.2)
    await client.post("/abort_requests", json={"request_ids": ["generate-tokens-s"]})
    rest = await resp.read()
    assert b'"finish_reason":"abort"' in rest and rest.endswith(b"data: [DONE]\n\n")


async def test_requests_are_recorded(make_engine):
    client = await make_engine()
    await client.post("/inference/v1/generate", json={**body(max_tokens=2), "request_id": "rec"})
    seen = await (await client.get("/debug/requests")).json()
    assert seen[-1]["request_id"] == "rec" and seen[-1]["sampling_params"] == {"max_tokens": 2}


async def test_first_token_times_are_handed_over_once(make_engine):
    """Each streamed request's arrival and first token written, on the client's perf_counter clock
    (a benchmark takes the engine's own time to first token out of the client's)."""
    client = await make_engine(token_delay_ms=20)
    before = time.perf_counter()
    for rid in ("ft1", "ft2"):
        await read_sse(await client.post("/inference/v1/generate", json={**body(), "stream": True, "request_id": rid}))
    await client.post("/inference/v1/generate", json={**body(), "request_id": "not-streamed"})
    after = time.perf_counter()
    taken = await (await client.get("/debug/first-tokens")).json()
    assert [t["request_id"] for t in taken] == ["generate-tokens-ft1", "generate-tokens-ft2"]
    for t in taken:
        # the first token waits one engine step (20 ms, a timer that may fire a hair early) after arrival
        assert before <= t["arrived"] and t["arrived"] + 0.019 <= t["first_token"] <= after
    assert await (await client.get("/debug/first-tokens")).json() == []


def test_parse_replies_formats():
    assert parse_replies('["a", {"text": "b", "when": "weather"}]') == [("a", None), ("b", "weather")]
    assert parse_replies('"a"\n{"content": "b"}\n') == [("a", None), ("b", None)]
    with pytest.raises(ValueError):
        parse_replies("[1]")


def test_conditional_reply_and_default_book(qwen3):
    book = ReplyBook(qwen3)
    weather = qwen3.tokenizer.encode("<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n")
    assert "<tool_call>" in book.pick(weather, 0).text
    hello = qwen3.tokenizer.encode("hi")
    assert book.pick(hello, 0) == book.pick(hello, 0)  # deterministic
    assert len({book.pick(hello, i).text for i in range(3)}) == 3
