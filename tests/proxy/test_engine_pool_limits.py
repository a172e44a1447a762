"""Engine pool limits against reference engines over real loopback HTTP: the per-engine
concurrency limit and its FIFO queue (timeout, cancellation), the circuit breaker (what opens
it, what does not, half-open probes) and fail-fast when every engine is open.

Engines are paced with the reference engine's fault knobs (a stream that stalls holds its slot
until aborted), so every assertion is about order and counts, never about timing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from proxy.engine.client import EngineError
from proxy.engine.pool import EnginePool
from proxy.reference_engine import REFERENCE, Faults, ReferenceEngine
from tests.proxy.frontdoor_stack import wait_for
from tests.proxy.loopback import url

def state(server: TestServer) -> ReferenceEngine:
    return server.app[REFERENCE]


def seen_ids(server: TestServer) -> list[str]:
    """The request ids the engine received, in order."""
    return [body["request_id"] for body in state(server).received]


def gen_request(request_id: str, stream: bool = True):
    return {"request_id": request_id, "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 50},
            "stream": stream}


async def drain(stream) -> list[dict]:
    events = []
    while (event := await stream.next()) is not None:
        events.append(event)
    return events


async def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


# -- concurrency limit and queue ----------------------------------------------------------------

async def test_requests_beyond_the_limit_wait_in_order_then_proceed(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=2))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=10)
    a, _ = await pool.open_stream(gen_request("a"))
    b_task = asyncio.create_task(pool.open_stream(gen_request("b")))
    c_task = asyncio.create_task(pool.generate(gen_request("c", stream=False)))
    await until(lambda: pool.queue_length == 2)
    assert seen_ids(server) == ["a"]  # nothing queued reached the engine
    assert pool.engines[0].outstanding == 1

    state(server).faults = Faults()
    a.abort()  # frees the slot: the first in line gets it, the second keeps waiting
    b, _ = await b_task
    assert not c_task.done() and pool.queue_length == 1
    assert seen_ids(server) == ["a", "b"]
    events = await drain(b)
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    _, answer = await c_task
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert seen_ids(server) == ["a", "b", "c"]
    assert pool.engines[0].outstanding == 0 and pool.queue_length == 0


async def test_limit_is_per_engine_and_queued_requests_take_any_free_engine(start_engine, engine_http):
    one = await start_engine(faults=Faults(stall_after=1))
    two = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(one), url(two)], engine_http, max_concurrency=1, queue_timeout=10)
    s1, _ = await pool.open_stream(gen_request("1"))
    s2, _ = await pool.open_stream(gen_request("2"))
    assert {s1.engine.url, s2.engine.url} == {url(one), url(two)}  # one each: both full now
    waiting = asyncio.create_task(pool.open_stream(gen_request("3")))
    await until(lambda: pool.queue_length == 1)
    second = s2.engine
    state(two if second.url == url(two) else one).faults = Faults()
    s2.abort()
    s3, _ = await waiting
    assert s3.engine is second
    await drain(s3)
    s1.abort()
    assert [e.outstanding for e in pool.engines] == [0, 0]


async def test_a_preferred_engine_wins_while_it_has_room_then_the_usual_choice_applies(start_engine, engine_http):
    """The front door prefers, for an echo + logprobs stream, the engine that answered its prompt
    logprobs side request (its prefix cache holds the prompt)."""
    one = await start_engine(faults=Faults(stall_after=1))
    two = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(one), url(two)], engine_http, max_concurrency=1, queue_timeout=10)
    second = pool.engines[1]
    assert pool.choose() is pool.engines[0]  # a tie goes to the first listed...
    s1, _ = await pool.open_stream(gen_request("1"), prefer=second)
    assert s1.engine is second  # ...unless another is preferred
    s2, _ = await pool.open_stream(gen_request("2"), prefer=second)
    assert s2.engine is pool.engines[0]  # the preferred one is full: the request does not wait for it
    waiting = asyncio.create_task(pool.open_stream(gen_request("3"), prefer=second))
    await until(lambda: pool.queue_length == 1)
    state(one).faults = Faults()
    s2.abort()  # the other engine frees first: the queued request takes it
    s3, _ = await waiting
    assert s3.engine is pool.engines[0]
    await drain(s3)
    s1.abort()
    assert [e.outstanding for e in pool.engines] == [0, 0]


async def test_prefix_affinity_falls_back_to_the_next_engine_when_its_own_is_full(start_engine, engine_http):
    servers = [await start_engine(faults=Faults(stall_after=1)) for _ in range(3)]
    pool = EnginePool([url(s) for s in servers], engine_http, affinity_tokens=3, max_concurrency=1, queue_timeout=10)
    prompt = [7, 8, 9]
    home = pool.choose(prompt)
    order = []  # the prefix's engines in preference order, as each fills up
    streams = []
    for i in range(3):
        request = {**gen_request(f"p{i}"), "token_ids": prompt + [i]}
        stream, _ = await pool.open_stream(request, prompt + [i])
        streams.append(stream)
        order.append(stream.engine)
    assert order[0] is home
    assert len(set(order)) == 3  # never queued while another engine had room
    assert pool.choose(prompt) is None and pool.queue_length == 0
    for stream in streams:
        stream.abort()
    assert pool.choose(prompt + [99]) is home  # with room again, the prefix goes home


async def test_siblings_of_one_request_are_admitted_together(start_engine, engine_http):
    """The prompts of one multi-prompt completion are opened together and held until all have
    started: queued one by one they would hold slots while waiting for each other."""
    server = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=0.3)
    # without a group: the first prompt's stream holds the only slot, the others cannot start
    results = await asyncio.gather(*(pool.open_stream(gen_request(f"alone{i}")) for i in range(3)),
                                   return_exceptions=True)
    opened = [r for r in results if not isinstance(r, BaseException)]
    assert len(opened) == 1 and all(isinstance(r, EngineError) and r.kind == "busy" for r in results
                                    if isinstance(r, BaseException))
    opened[0][0].abort()

    pool.queue_timeout = 10
    group = object()
    blocker, _ = await pool.open_stream(gen_request("first"))
    siblings = [asyncio.create_task(pool.open_stream(gen_request(f"sib{i}"), group=group)) for i in range(3)]
    await until(lambda: pool.queue_length == 3)
    other = asyncio.create_task(pool.open_stream(gen_request("other")))
    await until(lambda: pool.queue_length == 4)
    blocker.abort()  # the first sibling gets the slot, and brings the other two in with it
    streams = [s for s, _ in await asyncio.gather(*siblings)]
    assert pool.engines[0].outstanding == 3 and pool.queue_length == 1 and not other.done()
    late, _ = await pool.open_stream(gen_request("late"), group=group)  # the group is in: no wait
    state(server).faults = Faults()
    for stream in streams + [late]:
        stream.abort()
    stream, _ = await other
    await drain(stream)
    assert pool.engines[0].outstanding == 0 and not pool._groups


async def test_queue_timeout_is_a_503_and_the_request_never_reaches_an_engine(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=0.2)
    a, _ = await pool.open_stream(gen_request("a"))
    with pytest.raises(EngineError) as err:
        await pool.generate(gen_request("late", stream=False))
    assert err.value.status == 503 and err.value.type == "ServiceUnavailableError"
    assert err.value.kind == "busy" and err.value.retry_after == 1
    assert "concurrency limit" in err.value.message
    assert pool.queue_length == 0 and seen_ids(server) == ["a"]
    # without a queue (timeout 0) the answer is immediate
    pool.queue_timeout = 0
    with pytest.raises(EngineError) as err:
        await pool.open_stream(gen_request("now"))
    assert err.value.status == 503 and seen_ids(server) == ["a"]
    a.abort()
    assert pool.engines[0].outstanding == 0
    assert pool.engines[0].circuit.state == "closed"  # shedding is not the engine's failure


async def test_a_full_queue_answers_503_at_once_and_the_waiters_still_proceed(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=10, max_queue=2)
    a, _ = await pool.open_stream(gen_request("a"))
    queued = [asyncio.create_task(pool.generate(gen_request(f"q{i}", stream=False))) for i in range(2)]
    await until(lambda: pool.queue_length == 2)
    started = time.monotonic()
    with pytest.raises(EngineError) as err:
        await pool.open_stream(gen_request("third"))
    assert time.monotonic() - started < 1  # not after the 10 s queue timeout
    assert err.value.status == 503 and err.value.kind == "busy" and err.value.retry_after == 1
    assert "2 requests are already waiting" in err.value.message
    assert pool.queue_length == 2 and seen_ids(server) == ["a"]
    state(server).faults = Faults()
    a.abort()
    for task in queued:
        _, answer = await task
        assert answer["choices"][0]["finish_reason"] == "stop"
    assert seen_ids(server) == ["a", "q0", "q1"]
    assert pool.queue_length == 0 and pool.engines[0].outstanding == 0


async def test_cancelled_while_queued_leaves_the_queue_and_sends_nothing(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=10)
    a, _ = await pool.open_stream(gen_request("a"))
    gone = asyncio.create_task(pool.open_stream(gen_request("gone")))
    await until(lambda: pool.queue_length == 1)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert pool.queue_length == 0
    state(server).faults = Faults()
    a.abort()
    # the cancelled request holds no slot: the next one is served at once, not after a timeout
    pool.queue_timeout = 0
    _, answer = await pool.generate(gen_request("next", stream=False))
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert seen_ids(server) == ["a", "next"]
    assert [a["request_id"] for a in state(server).aborted] == ["generate-tokens-a"] * len(state(server).aborted)
    assert pool.engines[0].outstanding == 0


async def test_many_requests_with_cancellations_keep_the_books_straight(start_engine, engine_http):
    """50 concurrent requests on two engines limited to 3 each, a third of them cancelled at
    random points (queued, just granted, streaming): every other one completes, no engine ever
    has more than 3, and no slot or queue entry is left behind."""
    import random

    servers = [await start_engine(token_delay_ms=2) for _ in range(2)]
    pool = EnginePool([url(s) for s in servers], engine_http, max_concurrency=3, queue_timeout=30)
    peak = [0]
    sampling = True

    async def sample() -> None:
        while sampling:
            peak[0] = max(peak[0], *(e.outstanding for e in pool.engines))
            await asyncio.sleep(0)

    async def one(i: int) -> str:
        if i % 2:
            stream, _ = await pool.open_stream(gen_request(f"s{i}"))
            try:
                events = await drain(stream)
            finally:
                stream.abort()  # as the front door does when its client goes away mid-stream
            return events[-1]["choices"][0]["finish_reason"]
        _, answer = await pool.generate(gen_request(f"g{i}", stream=False))
        return answer["choices"][0]["finish_reason"]

    sampler = asyncio.create_task(sample())
    rng = random.Random(5)
    tasks = [asyncio.create_task(one(i)) for i in range(50)]
    for i in rng.sample(range(50), 17):
        await asyncio.sleep(rng.random() * 0.01)
        tasks[i].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    sampling = False
    await sampler
    finished = [r for r in results if not isinstance(r, BaseException)]
    assert all(isinstance(r, (str, asyncio.CancelledError)) for r in results), results
    assert finished and set(finished) == {"stop"}
    assert 1 <= peak[0] <= 3
    assert [e.outstanding for e in pool.engines] == [0, 0] and pool.queue_length == 0


# -- circuit breaker ------------------------------------------------------------------------------

async def test_consecutive_5xx_open_the_circuit_and_a_probe_closes_it(start_engine, engine_http):
    bad = await start_engine(faults=Faults(fail_status=500))
    good = await start_engine()
    pool = EnginePool([url(bad), url(good)], engine_http, failure_threshold=2, cooldown=0.3)
    first = pool.engines[0]
    for i in range(2):  # ties go to the first listed: it fails, the retry lands on the good one
        engine, _ = await pool.generate(gen_request(f"r{i}", stream=False))
        assert engine.url == url(good)
    assert state(bad).generate_calls == 2
    assert first.circuit.state == "open" and not first.healthy
    for i in range(3):  # open: not tried at all
        stream, _ = await pool.open_stream(gen_request(f"s{i}"))
        assert stream.engine.url == url(good)
        await drain(stream)
    assert state(bad).generate_calls == 2
    await pool.check_all()  # its /health is fine, but only a real request may close it
    assert first.circuit.state == "open"

    await until(lambda: first.circuit.state == "half_open")
    engine, _ = await pool.generate(gen_request("probe1", stream=False))  # the probe fails: open again
    assert engine.url == url(good) and state(bad).generate_calls == 3
    assert first.circuit.state == "open"

    state(bad).faults = Faults()
    await until(lambda: first.circuit.state == "half_open")
    stream, _ = await pool.open_stream(gen_request("probe2"))
    assert stream.engine is first and first.circuit.state == "closed"  # its first token closed it
    await drain(stream)
    engine, _ = await pool.generate(gen_request("after", stream=False))
    assert engine is first


async def test_client_errors_never_open_the_circuit(start_engine, engine_http):
    server = await start_engine(faults=Faults(fail_status=400))
    other = await start_engine()
    pool = EnginePool([url(server), url(other)], engine_http, failure_threshold=2, cooldown=30)
    for i in range(4):
        with pytest.raises(EngineError) as err:
            await pool.generate(gen_request(f"bad{i}", stream=False))
        assert err.value.status == 400  # passed on, not retried elsewhere
    assert state(server).generate_calls == 4 and state(other).generate_calls == 0
    assert pool.engines[0].circuit.state == "closed" and pool.engines[0].circuit.failures == 0


async def test_broken_streams_count_and_our_own_aborts_do_not(start_engine, engine_http):
    server = await start_engine(faults=Faults(drop_after=2))
    pool = EnginePool([url(server)], engine_http, failure_threshold=2, cooldown=30)
    circuit = pool.engines[0].circuit
    for i in range(3):  # closed by us (client gone, stop string): no outcome
        stream, _ = await pool.open_stream(gen_request(f"mine{i}"))
        stream.abort()
    assert circuit.failures == 0
    stream, _ = await pool.open_stream(gen_request("cut1"))
    with pytest.raises(EngineError):
        await drain(stream)
    assert circuit.failures == 1 and circuit.state == "closed"
    stream, _ = await pool.open_stream(gen_request("cut2"))
    with pytest.raises(EngineError):
        await drain(stream)
    assert circuit.state == "open"
    assert pool.engines[0].outstanding == 0


async def test_first_token_timeouts_count(start_engine, engine_http):
    from proxy.engine.client import EngineTimeouts

    server = await start_engine(faults=Faults(stall_after=0))  # accepts, never sends a token
    pool = EnginePool([url(server)], engine_http, timeouts=EngineTimeouts(first_token=0.1), failure_threshold=2,
                      cooldown=30)
    for i in range(2):
        with pytest.raises(EngineError) as err:
            await pool.open_stream(gen_request(f"t{i}"))
        assert err.value.kind == "timeout" and err.value.status == 504
    assert pool.engines[0].circuit.state == "open" and pool.engines[0].outstanding == 0
    assert state(server).generate_calls == 2


async def test_a_success_resets_the_consecutive_count(start_engine, engine_http):
    server = await start_engine()
    pool = EnginePool([url(server)], engine_http, failure_threshold=2, cooldown=30)
    for i in range(3):
        state(server).faults = Faults(fail_status=503)
        with pytest.raises(EngineError):
            await pool.generate(gen_request(f"f{i}", stream=False))
        state(server).faults = Faults()
        await pool.generate(gen_request(f"ok{i}", stream=False))
    assert pool.engines[0].circuit.state == "closed"


async def test_every_engine_open_fails_fast_without_calling_one(start_engine, engine_http):
    server = await start_engine(faults=Faults(fail_status=500))
    pool = EnginePool([url(server)], engine_http, failure_threshold=1, cooldown=30)
    with pytest.raises(EngineError) as err:
        await pool.generate(gen_request("x", stream=False))
    assert err.value.status == 502  # the engine's own failure
    for request in (pool.generate(gen_request("y", stream=False)), pool.open_stream(gen_request("z"))):
        with pytest.raises(EngineError) as err:
            await request
        assert err.value.status == 503 and err.value.kind == "unavailable"
        assert "unavailable" in err.value.message and 1 <= err.value.retry_after <= 30
    assert state(server).generate_calls == 1


async def test_queued_requests_fail_fast_when_every_engine_opens(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=1))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=30, cooldown=30)
    a, _ = await pool.open_stream(gen_request("a"))
    waiting = asyncio.create_task(pool.generate(gen_request("w", stream=False)))
    await until(lambda: pool.queue_length == 1)
    pool.mark_down(pool.engines[0], "test")  # e.g. a failed /health poll
    with pytest.raises(EngineError) as err:
        await waiting  # at once, not after the 30 s queue timeout
    assert err.value.kind == "unavailable" and pool.queue_length == 0
    a.abort()
    assert seen_ids(server) == ["a"]


async def test_half_open_lets_one_probe_through(start_engine, engine_http):
    server = await start_engine(faults=Faults(fail_status=500))
    pool = EnginePool([url(server)], engine_http, failure_threshold=1, cooldown=0.2)
    engine = pool.engines[0]
    with pytest.raises(EngineError):
        await pool.generate(gen_request("x", stream=False))
    state(server).faults = Faults(stall_after=0)  # the probe gets no first token until we let it
    await until(lambda: engine.circuit.state == "half_open")
    probe = asyncio.create_task(pool.open_stream(gen_request("probe")))
    await until(lambda: engine.circuit.probing)
    second = asyncio.create_task(pool.open_stream(gen_request("second")))
    await until(lambda: pool.queue_length == 1)  # no concurrency limit, yet it waits for the probe
    assert seen_ids(server) == ["x", "probe"]
    state(server).faults = Faults()
    probe.cancel()  # a probe we end ourselves proves nothing: the next request probes
    with pytest.raises(asyncio.CancelledError):
        await probe
    stream, _ = await second
    assert engine.circuit.state == "closed"
    await drain(stream)
    assert seen_ids(server) == ["x", "probe", "second"] and engine.outstanding == 0


async def test_unreachable_engine_is_back_on_a_good_health_poll(start_engine, engine_http):
    server = await start_engine()
    pool = EnginePool([url(server)], engine_http, cooldown=30)
    pool.mark_down(pool.engines[0], "connection refused")
    with pytest.raises(EngineError) as err:
        await pool.generate(gen_request("x", stream=False))
    assert err.value.kind == "unavailable"
    await pool.check_all()
    assert pool.engines[0].circuit.state == "closed"
    await pool.generate(gen_request("y", stream=False))


# -- through the front door: the real proxy app, the official openai client ----------------------

MESSAGES = [{"role": "user", "content": "Hi there"}]
LONG_REPLY = "one two three four five six seven eight"


@pytest.fixture
def stacks(qwen3):
    from tests.proxy.frontdoor_stack import Stack

    made = []

    def make(**config) -> Stack:
        made.append(Stack(qwen3, **config))
        return made[-1]

    yield make
    for stack in made:
        for held in getattr(stack, "held", []):  # a failed test's open stream would delay the shutdown
            held.close()
        stack.close()



def proxy_pool(stack) -> EnginePool:
    from proxy.engine.pool import POOL

    return stack.proxy.app[POOL]


def scrape(stack) -> dict:
    from tests.proxy.test_metrics import scrape_url

    return scrape_url(stack.url)


def metric(stack, name: str, **labels: str) -> float:
    return scrape(stack).get((name, tuple(sorted(labels.items()))), 0.0)


def hold_the_slot(stack):
    """A streamed chat whose engine stream stalls after its first token: it holds an engine slot
    until the client closes it."""
    stack.set_replies([LONG_REPLY], faults=Faults(stall_after=1))
    held = stack.client(timeout=20).chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
    next(iter(held))
    stack.held = [*getattr(stack, "held", []), held]
    return held


def wait_in_the_queue(stack) -> tuple[Any, list]:
    """A chat request, in a thread, once it waits in the queue: (the thread, its answers)."""
    import threading

    answers: list = []
    waiting = threading.Thread(target=lambda: answers.append(stack.client(timeout=20).chat.completions.create(
        model="tiny-qwen3", messages=MESSAGES)))
    waiting.start()
    wait_for(lambda: proxy_pool(stack).queue_length == 1)
    return waiting, answers


def test_front_door_request_waits_for_a_free_slot_then_proceeds(stacks):
    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=20)
    held = hold_the_slot(stack)
    waiting, answers = wait_in_the_queue(stack)
    assert metric(stack, "derender_proxy_engine_queue_length") == 1
    assert stack.engine_state.generate_calls == 1  # the queued request has not reached the engine
    stack.engine_state.faults = Faults()
    held.close()  # the client leaves: its engine request is aborted and the slot goes to the waiter
    waiting.join(20)
    assert answers and answers[0].choices[0].message.content == LONG_REPLY
    assert stack.engine_state.generate_calls == 2
    assert metric(stack, "derender_proxy_engine_queue_wait_seconds_count") == 1
    assert metric(stack, "derender_proxy_engine_queue_length") == 0


def test_front_door_queue_timeout_is_a_503_openai_error(stacks):
    import openai

    from tests.proxy.frontdoor_stack import post_raw

    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=0.2)
    held = hold_the_slot(stack)
    client = stack.client(timeout=20)
    with pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
    assert err.value.status_code == 503
    assert err.value.body["type"] == "ServiceUnavailableError" and "concurrency limit" in err.value.body["message"]
    with pytest.raises(openai.APIStatusError) as err:
        client.completions.create(model="tiny-qwen3", prompt="Hi", max_tokens=5)
    assert err.value.status_code == 503
    status, headers, text = post_raw(stack.base_url + "/chat/completions",
                                     {"model": "tiny-qwen3", "messages": MESSAGES})
    assert status == 503 and headers["content-type"] == "application/json"
    error = __import__("json").loads(text)["error"]
    assert error["code"] == 503 and error["type"] == "ServiceUnavailableError"
    assert stack.engine_state.generate_calls == 1
    assert metric(stack, "derender_proxy_requests_shed_total", reason="queue_timeout") == 3
    held.close()


def test_front_door_full_queue_is_an_immediate_503_openai_error(stacks):
    import openai

    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=20, engine_max_queue=1)
    held = hold_the_slot(stack)
    waiting, answers = wait_in_the_queue(stack)
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as err:
        stack.client(timeout=20).chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
    assert time.monotonic() - started < 5
    assert err.value.status_code == 503 and err.value.response.headers["retry-after"] == "1"
    assert "already waiting" in err.value.body["message"]
    assert metric(stack, "derender_proxy_requests_shed_total", reason="queue_full") == 1
    stack.engine_state.faults = Faults()
    held.close()
    waiting.join(20)
    assert answers and answers[0].choices[0].message.content == LONG_REPLY
    assert stack.engine_state.generate_calls == 2  # the held stream and the one that waited


def test_front_door_client_leaving_the_queue_is_never_sent_to_the_engine(stacks):
    import json
    import socket

    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=20)
    held = hold_the_slot(stack)
    body = json.dumps({"model": "tiny-qwen3", "messages": MESSAGES, "stream": True}).encode()
    sock = socket.create_connection(("127.0.0.1", stack.proxy.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"X-Request-Id: left-the-queue\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    pool = proxy_pool(stack)
    wait_for(lambda: pool.queue_length == 1)
    sock.close()
    wait_for(lambda: pool.queue_length == 0)  # the disconnect cancelled it out of the queue
    stack.engine_state.faults = Faults()
    held.close()
    wait_for(lambda: pool.engines[0].outstanding == 0)
    answer = stack.client(timeout=20).chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    assert answer.choices[0].message.content == LONG_REPLY
    sent = [body["request_id"] for body in stack.engine_state.received]
    assert len(sent) == 2 and not any(rid.startswith("left-the-queue") for rid in sent)


def test_front_door_failing_engine_is_taken_out_then_probed_back(stacks):
    import openai

    stack = stacks(engines=2, engine_failure_threshold=2, engine_cooldown=0.5)
    stack.set_replies(["fine"])
    bad, good = (server.app[REFERENCE] for server in stack.engines)
    bad_url = stack.engines[0].url
    client = stack.client(timeout=20)

    bad.faults = Faults(fail_status=400)  # the client's fault, passed on: never opens the circuit
    for _ in range(3):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    assert metric(stack, "derender_proxy_engine_circuit_state", engine=bad_url) == 0
    assert good.generate_calls == 0

    bad.faults = Faults(fail_status=500)
    for _ in range(2):  # tried first (ties go to the first listed), fails, retried on the other
        answer = client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
        assert answer.choices[0].message.content == "fine"
    assert bad.generate_calls == 5
    assert metric(stack, "derender_proxy_engine_circuit_state", engine=bad_url) == 2  # open
    assert metric(stack, "derender_proxy_engine_circuit_opened_total", engine=bad_url) == 1
    for _ in range(3):
        chunks = list(client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "fine"
    assert bad.generate_calls == 5  # open: no traffic at all

    bad.faults = Faults()
    wait_for(lambda: metric(stack, "derender_proxy_engine_circuit_state", engine=bad_url) == 1)  # half-open
    answer = client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    assert answer.choices[0].message.content == "fine"
    assert bad.generate_calls == 6  # the probe went to it and closed the circuit
    assert metric(stack, "derender_proxy_engine_circuit_state", engine=bad_url) == 0


def test_front_door_every_engine_open_fails_fast(stacks):
    import openai

    stack = stacks(engine_failure_threshold=1, engine_cooldown=30)
    stack.set_replies(["fine"], faults=Faults(fail_status=500))
    client = stack.client(timeout=20)
    with pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    assert err.value.status_code == 502  # the engine's own failure, passed on
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=stream)
        assert err.value.status_code == 503 and err.value.body["type"] == "ServiceUnavailableError"
        assert "unavailable" in err.value.body["message"] and "retry in" in err.value.body["message"]
    assert stack.engine_state.generate_calls == 1
    assert metric(stack, "derender_proxy_requests_shed_total", reason="unavailable") == 2


def test_limit_flags_reach_the_pool(qwen3):
    from proxy.app import create_app
    from proxy.cli import build_parser
    from proxy.config import config_from_args
    from proxy.engine.pool import POOL

    def parse(*argv: str):
        return config_from_args(build_parser().parse_args(["serve", "--engine-url", "http://e:8000", *argv]))

    defaults = parse()
    assert (defaults.engine_max_concurrency, defaults.engine_queue_timeout, defaults.engine_failure_threshold,
            defaults.engine_cooldown, defaults.engine_max_queue) == (0, 30.0, 5, 10.0, 0)
    config = parse("--engine-max-concurrency", "8", "--engine-queue-timeout", "2.5",
                   "--engine-failure-threshold", "3", "--engine-cooldown", "0.5", "--engine-max-queue", "64")
    pool = create_app(config, qwen3)[POOL]
    assert (pool.max_concurrency, pool.queue_timeout, pool.max_queue) == (8, 2.5, 64)
    assert {(e.circuit.failure_threshold, e.circuit.cooldown) for e in pool.engines} == {(3, 0.5)}
    for bad in (["--engine-max-concurrency", "-1"], ["--engine-cooldown", "nan"], ["--engine-queue-timeout", "x"],
                ["--engine-max-queue", "-1"]):
        with pytest.raises(SystemExit):
            parse(*bad)


def test_front_door_multi_prompt_completion_with_more_prompts_than_slots(stacks):
    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=0.5)
    stack.set_replies(["fine"])
    chunks = list(stack.client(timeout=20).completions.create(model="tiny-qwen3", prompt=["a", "b", "c"],
                                                          max_tokens=5, stream=True))
    texts = {}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert texts == {0: "fine", 1: "fine", 2: "fine"}


def test_front_door_streamed_echo_logprobs_with_more_prompts_than_slots(stacks):
    # the side requests (prompt logprobs) queue ahead of the streams (FIFO), so none waits for a slot that
    # a sibling's stream holds until every stream has started
    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=0.5)
    stack.set_replies(["fine"])
    chunks = list(stack.client(timeout=20).completions.create(model="tiny-qwen3", prompt=["a b", "c d"], max_tokens=5,
                                                          echo=True, logprobs=1, stream=True))
    firsts = {}
    for chunk in chunks:
        for choice in chunk.choices:
            firsts.setdefault(choice.index, choice)
    assert sorted(firsts) == [0, 1]
    for choice in firsts.values():
        assert choice.logprobs.token_logprobs[0] is None and None not in choice.logprobs.token_logprobs[1:2]


def test_front_door_503s_from_the_pool_say_when_to_retry(stacks):
    from tests.proxy.frontdoor_stack import post_raw

    stack = stacks(engine_max_concurrency=1, engine_queue_timeout=0.1, engine_failure_threshold=1,
                   engine_cooldown=30)
    held = hold_the_slot(stack)
    status, headers, _ = post_raw(stack.base_url + "/chat/completions", {"model": "tiny-qwen3", "messages": MESSAGES})
    assert status == 503 and headers.get("retry-after") == "1"  # busy: a slot usually frees soon
    held.close()
    wait_for(lambda: proxy_pool(stack).engines[0].outstanding == 0)
    stack.set_replies(["fine"], faults=Faults(fail_status=500))
    assert post_raw(stack.base_url + "/completions", {"model": "tiny-qwen3", "prompt": "Hi"})[0] == 502
    status, headers, _ = post_raw(stack.base_url + "/completions", {"model": "tiny-qwen3", "prompt": "Hi"})
    assert status == 503 and 25 <= int(headers.get("retry-after", "0")) <= 30  # until the cooldown ends


# -- work done while the engine computes the first token ---------------------------------------

async def test_while_waiting_runs_once_after_the_engine_accepted_the_request(start_engine, engine_http):
    server = await start_engine()
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=10)
    seen: list[list[str]] = []
    stream, first = await pool.open_stream(gen_request("w"), while_waiting=lambda: seen.append(seen_ids(server)))
    assert seen == [["w"]]  # once, and the engine had the request by then
    assert first is not None and first["choices"]
    await drain(stream)


async def test_a_failing_while_waiting_aborts_the_engine_request_and_frees_its_slot(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=2))
    pool = EnginePool([url(server)], engine_http, max_concurrency=1, queue_timeout=10)

    def fail() -> None:
        raise RuntimeError("the caller's own work failed")

    with pytest.raises(RuntimeError):
        await pool.open_stream(gen_request("x"), while_waiting=fail)
    await until(lambda: any(a.endswith("x") for a in state(server).aborted_ids()))  # (ids may carry a prefix)
    other, _ = await pool.open_stream(gen_request("y"))  # the slot is free again
    other.abort()
