"""/metrics over real HTTP: counters move by exactly what real requests did."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.metrics import metrics_of


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def scrape(client) -> dict:
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    return samples(await resp.text())


def requests_count(s: dict, route: str, status: str, method: str = "GET") -> float:
    return s.get(("derender_proxy_requests_total",
                  (("method", method), ("route", route), ("status", status))), 0.0)


@pytest.fixture
async def client(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(), qwen3))


async def test_request_counts_by_route_and_status(client):
    before = await scrape(client)
    for _ in range(3):
        assert (await client.get("/v1/models")).status == 200
    assert (await client.get("/health")).status == 200
    for _ in range(2):
        assert (await client.post("/v1/nothing", json={})).status == 404
    after = await scrape(client)
    assert requests_count(after, "/v1/models", "200") - requests_count(before, "/v1/models", "200") == 3
    assert requests_count(after, "/health", "200") - requests_count(before, "/health", "200") == 1
    for method in ("PROPFIND", "MKCOL"):  # methods the HTTP parser knows, we do not
        assert (await client.request(method, "/v1/nothing")).status in (404, 405)
    # unknown paths and methods share one label value: a scanner cannot blow up the label cardinality
    after_scan = await scrape(client)
    assert requests_count(after_scan, "unmatched", "404", "other") == 2
    assert requests_count(after, "unmatched", "404", "POST") - requests_count(before, "unmatched", "404", "POST") == 2
    key = ("derender_proxy_e2e_request_latency_seconds_count", (("route", "/v1/models"),))
    assert after[key] - before.get(key, 0) == 3
    # the scrape itself was counted in between
    assert requests_count(after, "/metrics", "200") == requests_count(before, "/metrics", "200") + 1


async def test_in_flight_gauge_counts_the_scrape_itself(client):
    s = await scrape(client)
    assert s[("derender_proxy_requests_in_flight", ())] == 1.0


async def test_api_moves_token_ttft_itl_engine_and_abort_series(client):
    """The calls the front door makes land in the exposition with the right names and amounts."""
    m = metrics_of(client.server.app)
    before = await scrape(client)
    m.add_tokens(12, 30)
    m.add_tokens(5, 0)
    m.observe_ttft(0.003)
    for gap in (0.001, 0.002, 0.0005):
        m.observe_itl(gap)
    m.engine_error("http://e1:8000", "connect")
    m.engine_error("http://e1:8000", "connect")
    m.engine_retry("http://e1:8000")
    m.abort("client_disconnect")
    after = await scrape(client)

    def delta(name, labels=()):
        return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)

    assert delta("derender_proxy_prompt_tokens_total") == 17
    assert delta("derender_proxy_generation_tokens_total") == 30
    assert delta("derender_proxy_time_to_first_token_seconds_count") == 1
    assert delta("derender_proxy_time_to_first_token_seconds_bucket", (("le", "0.0025"),)) == 0
    assert delta("derender_proxy_time_to_first_token_seconds_bucket", (("le", "0.005"),)) == 1
    assert delta("derender_proxy_inter_token_latency_seconds_count") == 3
    assert delta("derender_proxy_inter_token_latency_seconds_sum") == pytest.approx(0.0035)
    assert delta("derender_proxy_engine_errors_total", (("engine", "http://e1:8000"), ("kind", "connect"))) == 2
    assert delta("derender_proxy_engine_retries_total", (("engine", "http://e1:8000"),)) == 1
    assert delta("derender_proxy_aborts_total", (("cause", "client_disconnect"),)) == 1


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
async def test_event_loop_lag_probe_sees_a_blocked_loop(client):
    import time

    await asyncio.sleep(0.3)  # let the probe run at least once
    before = await scrape(client)
    time.sleep(0.8)  # block the loop: the next probe must report > 0.5 s of lag
    await asyncio.sleep(0.35)
    after = await scrape(client)
    count = ("derender_proxy_event_loop_lag_seconds_count", ())
    assert after[count] > before[count]
    assert after[("derender_proxy_event_loop_lag_last_seconds", ())] < 0.25  # recovered
    blocked = ("derender_proxy_event_loop_lag_seconds_bucket", (("le", "0.5"),))
    total = count
    # exactly one probe saw a lag above 0.5 s: the blocked one
    assert (after[total] - after[blocked]) - (before[total] - before[blocked]) == 1


async def test_two_apps_do_not_share_counters(aiohttp_client, qwen3):
    a = await aiohttp_client(create_app(ServerConfig(), qwen3))
    b = await aiohttp_client(create_app(ServerConfig(), qwen3))
    await a.get("/v1/models")
    await a.get("/v1/models")
    sa, sb = await scrape(a), await scrape(b)
    assert requests_count(sa, "/v1/models", "200") == 2
    assert requests_count(sb, "/v1/models", "200") == 0


# --- through the real front door: proxy + reference engine, the official client ------------------------

REPLY = "Paris is the capital of France, and its best-known landmark is the Eiffel Tower."


def scrape_url(url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        return samples(resp.read().decode())


def delta(after: dict, before: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.fixture(scope="module")
def stack(qwen3):
    from tests.proxy.frontdoor_stack import Stack

    s = Stack(qwen3)
    s.set_replies([REPLY])
    yield s
    s.close()


def test_front_door_moves_request_token_ttft_and_itl_series(stack, qwen3, caplog):
    """Counters move by exactly what the responses' usage says; so do the access-log lines."""
    import logging

    caplog.set_level(logging.INFO, logger="derender_proxy.access")

    client = stack.client()
    messages = [{"role": "user", "content": "Tell me about Paris."}]
    before = scrape_url(stack.url)
    full = client.chat.completions.create(model="tiny-qwen3", messages=messages)
    chunks = list(client.chat.completions.create(model="tiny-qwen3", messages=messages, stream=True,
                                                 stream_options={"include_usage": True}))
    after = scrape_url(stack.url)
    usage = full.usage
    assert chunks[-1].usage.completion_tokens == usage.completion_tokens
    n_reply = len(qwen3.tokenizer.encode(REPLY, add_special_tokens=False))
    assert usage.completion_tokens == n_reply + 1  # the reply, then <|im_end|>
    assert delta(after, before, "derender_proxy_requests_total",
                 route="/v1/chat/completions", method="POST", status="200") == 2
    assert delta(after, before, "derender_proxy_e2e_request_latency_seconds_count",
                 route="/v1/chat/completions") == 2
    assert delta(after, before, "derender_proxy_prompt_tokens_total") == 2 * usage.prompt_tokens
    assert delta(after, before, "derender_proxy_generation_tokens_total") == 2 * usage.completion_tokens
    # only the streamed engine request has a first token to time (the other is one JSON answer)
    assert delta(after, before, "derender_proxy_time_to_first_token_seconds_count") == 1
    # one gap per engine chunk after the first: at most one per token (chunks that arrive in the
    # same network read are taken together, so fewer under load)
    itl = delta(after, before, "derender_proxy_inter_token_latency_seconds_count")
    assert 1 <= itl <= usage.completion_tokens
    assert delta(after, before, "derender_proxy_requests_in_flight") == 0
    lines = [r.fields for r in caplog.records
             if r.name == "derender_proxy.access" and r.fields["route"] == "/v1/chat/completions"]
    assert [(line["prompt_tokens"], line["completion_tokens"]) for line in lines] == [
        (usage.prompt_tokens, usage.completion_tokens)] * 2


def test_front_door_counts_engine_errors_retries_and_stop_string_aborts(qwen3):
    from tests.proxy.frontdoor_stack import Stack

    stack = Stack(qwen3, dead_engines=1)  # fresh: the dead engine has not been marked down yet
    # paced, so the stop string ("capital", 4th token) always cuts before the engine is done
    stack.set_replies([REPLY], token_delay_ms=20)
    try:
        _errors_retries_and_stop_strings(stack)
    finally:
        stack.close()


def _errors_retries_and_stop_strings(stack) -> None:
    dead = stack.config.engine_url[0]
    client = stack.client()
    before = scrape_url(stack.url)
    for _ in range(4):  # least-outstanding choice will try the dead engine at least once
        out = client.chat.completions.create(model="tiny-qwen3", stop=["capital"],
                                             messages=[{"role": "user", "content": "Paris?"}])
        assert out.choices[0].message.content == "Paris is the "
    stack.wait_aborted()
    after = scrape_url(stack.url)
    errors = sum(v for (name, labels), v in after.items()
                 if name == "derender_proxy_engine_errors_total" and ("engine", dead) in labels)
    errors -= sum(v for (name, labels), v in before.items()
                  if name == "derender_proxy_engine_errors_total" and ("engine", dead) in labels)
    retries = delta(after, before, "derender_proxy_engine_retries_total", engine=dead)
    assert errors >= 1 and retries == errors  # each failure before the first token was retried once
    assert delta(after, before, "derender_proxy_aborts_total", cause="stop_string") == 4
    assert delta(after, before, "derender_proxy_requests_total",
                 route="/v1/chat/completions", method="POST", status="200") == 4


async def test_client_disconnect_is_counted_as_an_abort_and_a_499(stack):
    import aiohttp

    stack.set_replies([REPLY], token_delay_ms=50)
    try:
        before = scrape_url(stack.url)
        async with aiohttp.ClientSession() as session:
            resp = await session.post(stack.base_url + "/chat/completions", json={
                "model": "tiny-qwen3", "stream": True, "messages": [{"role": "user", "content": "Paris?"}]})
            async for line in resp.content:
                if line.startswith(b"data: "):
                    break
            resp.close()  # the client goes away mid-stream
        await asyncio.get_running_loop().run_in_executor(None, stack.wait_aborted)
        await asyncio.sleep(0.1)
        after = scrape_url(stack.url)
    finally:
        stack.set_replies([REPLY])
    assert delta(after, before, "derender_proxy_aborts_total", cause="client_disconnect") == 1
    assert delta(after, before, "derender_proxy_requests_total",
                 route="/v1/chat/completions", method="POST", status="499") == 1


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
def test_first_token_overhead_leaves_the_engine_out(qwen3):
    """The proxy's own share of TTFT: one observation per stream (chat and completions), none for
    a non-streamed answer, and the engine's time before its first token is not in it."""
    from tests.proxy.frontdoor_stack import Stack

    stack = Stack(qwen3)
    stack.set_replies(["Paris is the capital."], token_delay_ms=300)  # every engine step, the first too
    try:
        client = stack.client()
        messages = [{"role": "user", "content": "Tell me about Paris."}]
        before = scrape_url(stack.url)
        client.chat.completions.create(model="tiny-qwen3", messages=messages, max_tokens=2)
        list(client.chat.completions.create(model="tiny-qwen3", messages=messages, max_tokens=2, stream=True))
        list(client.completions.create(model="tiny-qwen3", prompt="Paris", max_tokens=2, stream=True))
        after = scrape_url(stack.url)
    finally:
        stack.close()
    assert delta(after, before, "derender_proxy_first_token_overhead_seconds_count") == 2
    assert delta(after, before, "derender_proxy_time_to_first_token_seconds_count") == 2
    ttft = delta(after, before, "derender_proxy_time_to_first_token_seconds_sum")
    overhead = delta(after, before, "derender_proxy_first_token_overhead_seconds_sum")
    assert ttft >= 2 * 0.3  # the engine's first step, for each stream
    assert 0 < overhead < 0.3  # none of it: a render and a derender, a few milliseconds at most
