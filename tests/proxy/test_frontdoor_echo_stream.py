"""Streamed `/v1/completions` with `echo` + `logprobs`: the echoed prompt carries the engine's real
prompt logprobs, as the first chunk of `vllm serve` does.

A tokens-only engine sends `prompt_logprobs` only in non-streamed answers (docs/vllm-wire-spec.md §2.3), so the front
door fetches them with a non-streamed side request before opening the stream, and answers a
streamed echo with `max_tokens: 0` from one non-streamed engine request. Everything here goes
through real parts: the reference engine over HTTP, the proxy app, the official `openai` client.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import openai
import orjson
import pytest

from proxy.reference_engine import REFERENCE, Faults
from tests.proxy.frontdoor_stack import Stack, post_raw, wait_for
from tests.proxy.test_openai_completions import aggregate

REPLIES = [" Paris, of course.", " Lyon, then Marseille 🙂"]
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def stack(qwen3):
    s = Stack(qwen3)
    yield s
    s.close()



def logprob_aggregate(chunks: list[Any]) -> dict[int, dict]:
    """The shared streamed aggregate (text, tokens, offsets, finish) plus the logprob values."""
    out = aggregate(chunks)
    for chunk in chunks:
        for choice in chunk.choices:
            agg = out[choice.index]
            agg.setdefault("values", [])
            agg.setdefault("tops", [])
            if choice.logprobs:
                agg["values"] += choice.logprobs.token_logprobs
                agg["tops"] += choice.logprobs.top_logprobs
    return out


def full_aggregate(response: Any) -> dict[int, dict]:
    """The same fields from a non-streamed response."""
    out = {}
    for choice in response.choices:
        lp = choice.logprobs
        out[choice.index] = {"text": choice.text, "finish_reason": choice.finish_reason,
                             "stop_reason": choice.model_extra.get("stop_reason"),
                             "tokens": lp.tokens if lp else [], "offsets": lp.text_offset if lp else [],
                             "values": lp.token_logprobs if lp else [], "tops": lp.top_logprobs if lp else []}
    return out


def engine_prompt_logprobs(stack: Stack, prompt_ids: list[int], k: int) -> list[Any]:
    """What the engine itself answers for this prompt's logprobs (a direct non-streamed generate)."""
    status, _, text = post_raw(stack.engines[0].url + "/inference/v1/generate", {
        "token_ids": prompt_ids, "sampling_params": {"max_tokens": 1, "prompt_logprobs": k}, "stream": False})
    assert status == 200, text
    return orjson.loads(text)["prompt_logprobs"]


def assert_prompt_values(lp: Any, engine: list[Any], prompt_ids: list[int], k: int) -> None:
    """The echoed prompt's positions of completion logprobs hold the engine's numbers."""
    n = len(prompt_ids)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None  # nothing predicts the first token
    for pos in range(1, n):
        candidates = engine[pos]
        assert lp.token_logprobs[pos] == candidates[str(prompt_ids[pos])]["logprob"]
        assert lp.token_logprobs[pos] is not None
        expected = [c["logprob"] for c in candidates.values()][:k + 1]  # the prompt token first, then top k
        assert sorted(lp.top_logprobs[pos].values()) == sorted(expected)


def new_requests(stack: Stack, before: int) -> list[dict[str, Any]]:
    return list(stack.engine_state.received)[before:]


def test_streamed_echo_carries_the_engines_prompt_logprobs(stack, qwen3):
    stack.set_replies(REPLIES[:1])
    ids = qwen3.tokenizer.encode(PROMPT)
    before = len(stack.engine_state.received)
    chunks = list(stack.client().completions.create(model="tiny-qwen3", prompt=PROMPT, echo=True, logprobs=2,
                                                   max_tokens=5, stream=True))
    side, streamed = new_requests(stack, before)
    first = chunks[0].choices[0]
    assert first.text.startswith(PROMPT) and len(first.text) > len(PROMPT)  # the prompt and the first token
    assert first.logprobs.tokens[:len(ids)] == [qwen3.tokenizer.decode([t]) for t in ids]
    assert_prompt_values(first.logprobs, engine_prompt_logprobs(stack, ids, 2), ids, 2)
    # the generated token after the prompt has its own logprob and continues the offsets
    assert first.logprobs.token_logprobs[len(ids)] is not None
    assert first.logprobs.text_offset[len(ids)] == len(PROMPT)
    assert side["stream"] is False and side["request_id"].startswith(chunks[0].id + "-prompt-logprobs-")
    assert side["sampling_params"]["max_tokens"] == 1 and side["sampling_params"]["prompt_logprobs"] == 2
    assert "logprobs" not in side["sampling_params"]
    assert streamed["stream"] is True and "prompt_logprobs" not in streamed["sampling_params"]
    assert streamed["sampling_params"]["skip_reading_prefix_cache"] is False  # the side request filled the cache
    assert streamed["sampling_params"]["logprobs"] == 2


CASES = {
    "one prompt": {"prompt": PROMPT, "max_tokens": 6},
    "several prompts": {"prompt": [PROMPT, "Bonjour 東京"], "max_tokens": 6},
    "n=2": {"prompt": PROMPT, "max_tokens": 6, "n": 2},
    "several prompts, n=2": {"prompt": ["Hello", PROMPT], "max_tokens": 4, "n": 2},
    "max_tokens 0": {"prompt": PROMPT, "max_tokens": 0},
    "max_tokens 0, several prompts, n=2": {"prompt": [PROMPT, "Hi"], "max_tokens": 0, "n": 2},
    "to the end of the reply": {"prompt": PROMPT, "max_tokens": 100},
    "ids as the prompt": {"prompt": [[9707, 11, 1879], [785, 6722]], "max_tokens": 3},
}


@pytest.mark.parametrize("logprobs", [0, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_stream_aggregate_equals_non_streamed(stack, qwen3, case, logprobs):
    stack.set_replies(REPLIES)
    c = stack.client()
    body = dict(CASES[case], model="tiny-qwen3", echo=True, logprobs=logprobs)
    full = c.completions.create(**body)
    chunks = list(c.completions.create(**body, stream=True, stream_options={"include_usage": True}))
    streamed = logprob_aggregate(chunks)
    expected = full_aggregate(full)
    assert streamed == expected
    assert chunks[-1].choices == [] and chunks[-1].usage == full.usage
    n = body.get("n", 1)
    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    for index, agg in streamed.items():
        prompt = prompts[index // n]
        ids = prompt if isinstance(prompt, list) else qwen3.tokenizer.encode(prompt)
        assert agg["text"].startswith(prompt if isinstance(prompt, str) else qwen3.tokenizer.decode(ids))
        lp = full.choices[index].logprobs
        assert_prompt_values(lp, engine_prompt_logprobs(stack, ids, logprobs), ids, logprobs)
        if body["max_tokens"] == 0:
            assert len(lp.tokens) == len(ids) and agg["finish_reason"] == "length"


def test_max_tokens_0_is_one_non_streamed_engine_request_written_as_sse(stack, qwen3):
    stack.set_replies(REPLIES)
    before = len(stack.engine_state.received)
    status, headers, text = post_raw(stack.url + "/v1/completions", {
        "model": "tiny-qwen3", "prompt": PROMPT, "echo": True, "max_tokens": 0, "logprobs": 1, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    (engine_request,) = new_requests(stack, before)  # no duplicate engine work
    assert engine_request["stream"] is False and engine_request["sampling_params"]["max_tokens"] == 1
    assert engine_request["sampling_params"]["prompt_logprobs"] == 1
    events = text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunk, usage = (orjson.loads(e[len("data: "):]) for e in events[:-2])
    n_prompt = len(qwen3.tokenizer.encode(PROMPT))
    (choice,) = chunk["choices"]
    # vLLM: the prompt only (the engine's one token is not shown, but it counts as completion tokens)
    assert (choice["text"], choice["finish_reason"]) == (PROMPT, "length")
    assert len(choice["logprobs"]["tokens"]) == n_prompt and choice["logprobs"]["token_logprobs"][0] is None
    assert None not in choice["logprobs"]["token_logprobs"][1:]
    assert chunk["usage"] == {"prompt_tokens": n_prompt, "total_tokens": n_prompt + 1, "completion_tokens": 1}
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 1
    assert chunk["id"] == usage["id"] and chunk["id"].startswith("cmpl-")


def test_echo_without_logprobs_makes_no_side_request(stack):
    stack.set_replies(REPLIES[:1])
    before = len(stack.engine_state.received)
    chunks = list(stack.client().completions.create(model="tiny-qwen3", prompt=PROMPT, echo=True, max_tokens=4,
                                                   stream=True))
    assert chunks[0].choices[0].text.startswith(PROMPT) and chunks[0].choices[0].logprobs is None
    (streamed,) = new_requests(stack, before)
    assert streamed["stream"] is True


def test_side_request_ignores_generation_only_params(stack):
    # min_tokens 3 would be rejected next to the side request's max_tokens 1 (min_tokens <= max_tokens)
    stack.set_replies(REPLIES[:1])
    chunks = list(stack.client().completions.create(model="tiny-qwen3", prompt=PROMPT, echo=True, logprobs=1,
                                                   max_tokens=5, stream=True, extra_body={"min_tokens": 3}))
    assert chunks[0].choices[0].logprobs.token_logprobs[1] is not None
    side = list(stack.engine_state.received)[-2]
    assert side["stream"] is False and "min_tokens" not in side["sampling_params"]


@pytest.mark.parametrize("max_tokens", [0, 5])
@pytest.mark.parametrize(("engine_status", "client_status"), [(400, 400), (500, 502)])
def test_engine_error_before_the_stream_is_a_json_error(stack, max_tokens, engine_status, client_status):
    stack.set_replies(REPLIES[:1], faults=Faults(fail_status=engine_status))
    before = len(stack.engine_state.received)
    try:
        with pytest.raises(openai.APIStatusError) as err:
            stack.client().completions.create(model="tiny-qwen3", prompt=PROMPT, echo=True, logprobs=2,
                                             max_tokens=max_tokens, stream=True)
    finally:
        stack.engine_state.faults = Faults()
    assert err.value.status_code == client_status
    assert err.value.response.headers["content-type"].startswith("application/json")
    if engine_status == 400:
        assert "injected failure" in err.value.body["message"]
    # the failing non-streamed request was the only one: no stream opened after it
    assert [r["stream"] for r in new_requests(stack, before)] == [False]


@pytest.mark.parametrize("max_tokens", [0, 5])
def test_client_gone_during_the_side_request_aborts_it(stack, max_tokens):
    stack.set_replies(REPLIES[:1], faults=Faults(stall_after=0))  # the engine never answers
    before = len(stack.engine_state.received)
    try:
        with pytest.raises(TimeoutError):
            post_raw(stack.url + "/v1/completions", {"model": "tiny-qwen3", "prompt": PROMPT, "echo": True,
                                                     "logprobs": 1, "max_tokens": max_tokens, "stream": True},
                     timeout=0.3)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and len({a["via"] for a in stack.engine_state.aborted}) < 2:
            time.sleep(0.01)
    finally:
        stack.engine_state.faults = Faults()
    (side,) = new_requests(stack, before)  # the stream was never opened
    assert side["stream"] is False
    aborted = stack.engine_state.aborted
    # the dropped connection and the explicit abort both reach the engine, for the side request
    assert {a["via"] for a in aborted} == {"disconnect", "abort_requests"}
    assert {a["request_id"] for a in aborted} == {"generate-tokens-" + side["request_id"]}


def test_several_prompts_client_gone_aborts_every_side_request(qwen3):
    two = Stack(qwen3)  # its own engine: the abort records start empty
    try:
        two.set_replies(REPLIES[:1], faults=Faults(stall_after=0))  # side requests hang...

        async def run() -> None:
            c = two.async_client(timeout=0.3)
            try:
                await c.completions.create(model="tiny-qwen3", prompt=[PROMPT, "Hi"], echo=True, logprobs=1,
                                           max_tokens=3, stream=True)
            finally:
                await c.close()

        with pytest.raises(openai.APITimeoutError):
            asyncio.run(run())
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and len(two.engine_state.aborted_ids()) < 2:
            time.sleep(0.01)
        sides = list(two.engine_state.received)
        assert [r["stream"] for r in sides] == [False, False]
        # ...and the client going away aborts both of them
        assert two.engine_state.aborted_ids() == {"generate-tokens-" + r["request_id"] for r in sides}
    finally:
        two.close()


async def test_async_client_streamed_echo_logprobs(stack, qwen3):
    stack.set_replies(REPLIES[:1])
    c = stack.async_client()
    try:
        stream = await c.completions.create(model="tiny-qwen3", prompt=PROMPT, echo=True, logprobs=1,
                                            max_tokens=4, stream=True)
        chunks = [chunk async for chunk in stream]
        full = await c.completions.create(model="tiny-qwen3", prompt=PROMPT, echo=True, logprobs=1, max_tokens=4)
    finally:
        await c.close()
    assert logprob_aggregate(chunks) == full_aggregate(full)
    ids = qwen3.tokenizer.encode(PROMPT)
    assert_prompt_values(chunks[0].choices[0].logprobs, engine_prompt_logprobs(stack, ids, 1), ids, 1)


def test_with_several_engines_the_stream_goes_where_its_side_request_went(qwen3):
    """The side request leaves the prompt in one engine's prefix cache; the stream follows it there,
    even when the usual choice (least outstanding, ties to the first listed) would go elsewhere."""
    stack = Stack(qwen3, engines=2)
    try:
        stack.set_replies(REPLIES[:1])
        first, second = (server.app[REFERENCE] for server in stack.engines)
        first.faults = Faults(stall_after=1)  # a stream that holds the first engine
        second.token_delay = 0.3  # the side request on the second engine lasts a while
        client = stack.client()
        holder = client.completions.create(model="tiny-qwen3", prompt="hold", max_tokens=50, stream=True)
        next(iter(holder))
        assert len(first.received) == 1
        result: dict[str, Any] = {}
        scoring = threading.Thread(target=lambda: result.update(chunks=list(client.completions.create(
            model="tiny-qwen3", prompt=PROMPT, echo=True, logprobs=1, max_tokens=2, stream=True))))
        scoring.start()
        wait_for(lambda: len(second.received) == 1)  # the side request: on the less loaded engine
        holder.close()  # the first engine is free again before the side request answers
        wait_for(lambda: bool(first.aborted))
        first.faults = Faults()  # (were the stream to go there, it would end, and fail below)
        scoring.join(30)
        assert not scoring.is_alive() and result["chunks"]
        assert len(first.received) == 1  # nothing else went to the first engine
        side, streamed = second.received
        assert side["stream"] is False and side["sampling_params"]["prompt_logprobs"] == 1
        assert streamed["stream"] is True and streamed["token_ids"] == side["token_ids"]
    finally:
        stack.close()
