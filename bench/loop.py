"""Benchmark the front door's loop: the proxy in front of a reference engine, against the same
client calling the engine directly.

    python bench/loop.py [--requests-per-level 6] [--levels 1 32 128] [--out bench/results/loop.md]

Three processes on loopback: `derender-proxy reference-engine`, `derender-proxy serve` in front of
it with the hermes + qwen3 parsers, and this client (aiohttp). For each concurrency level the
client sends the same streaming conversation four ways ("runs"):

* direct: the pre-rendered GenerateRequest to the engine's `/inference/v1/generate` (stream);
* chat completions: the OpenAI chat request to the proxy's `/v1/chat/completions` (stream);
* responses: the same conversation as an OpenAI Responses request to the proxy's `/v1/responses`
  (stream, `store: false`), the same prompt and engine reply written as Responses events;
* messages: the same conversation as an Anthropic Messages request to the proxy's `/v1/messages`
  (stream), the same prompt and engine reply written as Anthropic's event stream.

It reports time to first token (first SSE event: the proxy sends its first event only once the
engine's first token arrived), the added TTFT (proxied minus direct, p50 / p99), streamed tokens
per second, and the proxy's CPU seconds per request and engine tokens per proxy CPU second (from
/proc, so the engine and the client are not counted). The engine is the same in every run, so the
difference is what the proxy adds: render, HTTP hop, derender, parsers, SSE.

Two phases per level (three at concurrency 1). A 2-CPU virtual machine's speed drifts over seconds (other tenants, steal):
runs measured one after another see different host speeds, and their per-round ratios to chat
spread 0.5-2x. So:

* mixed phase (TTFT at every level; the costs too at concurrency 1): the four runs interleaved
  request by request. Each client sends cycles of four requests, each run once: client i's k-th
  request is position (i + k) mod 4 of [direct, then the three APIs], so at any moment the load is
  an even mix and every run sees the same host speed and the same load. The APIs' order changes
  from one cycle to the next through all six (in one fixed order, at concurrency 1, the same API
  would always follow the direct request). The requests are cut into `--rounds` consecutive rounds by
  start order for the paired per-round ratios to chat. At concurrency 1 each request gets its own
  CPU reading: the proxy's (the engine's for direct) CPU time before and after it, each read once
  the process stopped moving (re-read 1 ms apart until two readings agree, at most 20 ms). So one
  request's tail (closing the stream, metrics) is never counted on the next, and every request
  starts on an idle proxy and engine: the previous stream's last work no longer overlaps the next
  first token, which makes the zero-delay concurrency-1 added TTFT comparable too.
* first-token phase (TTFT at concurrency 1, `--first-token-requests` per run, default 192): the
  mixed phase again with every answer capped at FIRST_TOKEN_CAP tokens. The first event leaves with
  the first token, so the cap changes nothing before it; 48 full paced requests per run put the
  standard error of the added-TTFT ratio near 9% (the TTFTs' spread is ~1 ms around ~2 ms
  compared), as large as the 10% judged, and 4x the short requests take less time than them.
* per-API segments (the costs above concurrency 1): in a mixed load the proxy's CPU cannot be told
  apart by API, so each run's CPU, tokens/s, the proxy's own first-token time and the client's CPU
  come from `--rounds` rounds of segments (the level's clients all calling one run), the runs'
  order rotated each round; their TTFTs are not used. Segments one after another see different
  host speeds and different alignments of the paced streams' wakeups: their per-round CPU ratios
  spread 0.8-1.4, so they are shown but not compared.
* per-API proxies (the costs compared above concurrency 1): the mixed phase again, each API served
  by its own proxy process (three more proxies, the same flags, pinned to the proxy's CPU), so each
  API's CPU is its own process's while the three see the same host speed and load, request by
  request. Rounds are stretches of time: each proxy's CPU read 4 times a second, against the
  tokens its requests streamed in the stretch (each request's tokens spread evenly from its first
  event to its last). Between their phases the three are frozen (SIGSTOP): idle, each still woke
  several times a second on the measured proxy's CPU.

Added TTFT, engine's own time out: the reference engine records each streamed request's arrival and
first token written (`GET /debug/first-tokens`, on perf_counter's clock, the same in every process
here); every mixed-phase request names its engine request (X-Request-Id, or the Responses body's
request_id), so its TTFT less that engine time is what the client's path added to it, request by
request. The engine's wait for its first step (a 10 ms timer on a CPU it shares with the client)
is no part of what the front doors add; taken out, the ratios compare only the client's path. (On
this VM it was not the main part of the spread: the per-round ratios spread about as widely
either way; the rest is the proxy's own first-token work, which runs several times slower in the
server than in a hot loop, its caches cold between requests.)

CPU placement: on a machine with a few cores, three busy processes sharing them measure the
kernel's scheduler more than the proxy (a client waiting for its first event queues behind the
proxy's own streaming work). With `--pin` (the default when there are 2+ CPUs), the proxy gets
the last CPU to itself, as the anchors' method asks ("measure on one pinned core"), and the engine
and this client share the others, in every run alike.

Arrivals: each of the `concurrency` clients loops over its requests (closed loop); their starts
are spread over one request's duration, so the level measures a steady state rather than a burst
of `concurrency` simultaneous first requests.

Two engines: at zero token delay it streams as fast as it can, so every level saturates the CPUs
and TTFT there is mostly queueing; with `--paced-delay-ms` (10 ms per token, like a real engine's
decode) the load stays well under saturation, the condition of the added-TTFT target. The
environment variable BENCH_PROXY_RUNNER=script.py runs the proxy through that script instead of
`python -m proxy.cli` (e.g. a cProfile wrapper that calls `proxy.cli.main`).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loop_report import header, log_level, table  # noqa: E402
from bench.loop_runs import (  # noqa: E402
    FIRST_TOKEN_CAP, JSON_HEADERS, Cost, Run, Sample, Target, add_buckets, cpu_at, cpu_sets, own_ttfts, p50_or_nan,
    tokens_in,
)
from proxy.engine.sse import SSEDecoder  # noqa: E402

REPLY = ("<think>\nThe user asks for the weather in Paris. I know a tool for that, so I will call it with "
         "the city and the unit they are likely to want. " * 6
         + "\n</think>\n\nLet me check the current weather in Paris for you.\n\n<tool_call>\n"
         '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "details": "'
         + "hourly forecast with wind and humidity, " * 12 + '"}}\n</tool_call>')
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}, "unit": {"type": "string"},
                                               "details": {"type": "string"}}}}}]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, to the nanosecond: the sum of its threads' run time
    (/proc/PID/task/*/schedstat). /proc/PID/stat counts in clock ticks (10 ms): a concurrency-1
    round of ~0.1 s of proxy CPU would be off by up to 10%. Threads that ended are not counted;
    the proxy's threads (event loop, its thread pool) live for the whole run."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    if total:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            try:
                async with s.get(url + "/health") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def output_tokens(event: bytes) -> int | None:
    """The output tokens an event reports: a chat usage chunk's, a Messages `message_delta`'s or
    the final Responses event's response."""
    if b'"usage"' not in event:
        return None
    payload = orjson.loads(event)
    usage = payload.get("usage") or (payload.get("response") or {}).get("usage") or {}
    found = usage.get("completion_tokens", usage.get("output_tokens"))
    return int(found) if found else None


async def one_stream(session: aiohttp.ClientSession, url: str, body: bytes,
                     headers: dict[str, str] = JSON_HEADERS) -> tuple[float, int]:
    """(time to first event, engine tokens reported by the last event with a usage)."""
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {(await resp.read())[:300]!r}")
        decoder = SSEDecoder()
        ttft = None
        tokens = 0
        async for data in resp.content.iter_any():
            events = decoder.feed(data)
            if events:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                for ev in events:
                    if ev != b"[DONE]":
                        tokens = output_tokens(ev) or tokens
    return ttft or 0.0, tokens


OVERHEAD = "derender_proxy_first_token_overhead_seconds_bucket"


async def overhead_buckets(session: aiohttp.ClientSession, proxy_url: str) -> dict[float, float]:
    """The proxy's first-token-overhead histogram (cumulative counts by upper bound) from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    async with session.get(proxy_url + "/metrics") as r:
        text = await r.text()
    return {float(sample.labels["le"]): sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == OVERHEAD}


async def run_level(url: str, body: bytes, concurrency: int, total: int) -> dict:
    """One segment: `concurrency` closed-loop clients sending `total` requests to one run. Its
    warm-up request falls inside the caller's CPU reading but not in its tokens (alike for every run)."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        t_one = time.perf_counter()
        await one_stream(session, url, body)  # warm the connection and caches
        duration = time.perf_counter() - t_one
        queue = list(range(total))
        ttfts: list[float] = []
        tokens = 0
        rng = random.Random(concurrency)

        async def worker(i: int) -> None:
            nonlocal tokens
            # spread the clients' starts over one request's duration: a steady state, not a burst
            await asyncio.sleep(duration * i / concurrency + rng.uniform(0, duration / concurrency))
            while queue:
                queue.pop()
                ttft, n = await one_stream(session, url, body)
                ttfts.append(ttft)
                tokens += n

        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        wall, client_cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"ttfts": ttfts, "tokens": tokens, "wall": wall, "client_cpu": client_cpu}


async def settled_cpu(pid: int, cap: float = 0.020) -> float:
    """The process's CPU seconds once it stopped moving: re-read 1 ms apart until two readings
    agree (for at most `cap` seconds). The proxy still works on a request after the client read its
    last event (closing the stream, metrics): read at once, that tail would count on the next one."""
    deadline = time.perf_counter() + cap
    last = cpu_seconds(pid)
    while time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
        now = cpu_seconds(pid)
        if now == last:
            break
        last = now
    return last


class OverheadSince:
    """The proxy's first-token-overhead histogram since the previous reading: what the streamed
    requests in between observed (a /metrics request observes nothing there)."""

    def __init__(self, session: aiohttp.ClientSession, proxy_url: str) -> None:
        self.session, self.proxy_url = session, proxy_url
        self.last: dict[float, float] = {}

    async def start(self) -> None:
        self.last = await overhead_buckets(self.session, self.proxy_url)

    async def read(self) -> dict[float, float]:
        now = await overhead_buckets(self.session, self.proxy_url)
        since = {bound: count - self.last.get(bound, 0.0) for bound, count in now.items()}
        self.last = now
        return since


# a cycle of the mixed phase: the direct request, then the three APIs in one of their six orders
CYCLES = [(0, *order) for order in itertools.permutations((1, 2, 3))]


def mixed_run(client: int, k: int) -> int:
    """The run (0 direct, 1-3 the APIs) of the client's k-th request: position (client + k) mod 4
    of the (k // 4)-th cycle, so at each step the clients' requests are an even mix and each client
    sends every run once per cycle. The cycles walk through the APIs' six orders: in one fixed order,
    at concurrency 1, the same API would always follow the direct request (the proxy idle for a
    whole request) and another always precede it."""
    return CYCLES[k // 4 % len(CYCLES)][(client + k) % 4]


async def warm_up(session: aiohttp.ClientSession, targets: list[Target]) -> float:
    """One request per run (connections, caches); their mean duration, to spread the clients' starts."""
    durations = []
    for target in targets:
        t0 = time.perf_counter()
        await one_stream(session, target.url, target.body)
        durations.append(time.perf_counter() - t0)
    return statistics.mean(durations)


# the engine request of a mixed-phase request is named bq<order>z (order: its start order in the phase)
TAG = re.compile(r"bq(\d+)z")


async def timed_request(session: aiohttp.ClientSession, targets: list[Target], run: int, order: int) -> Sample:
    target = targets[run]
    t0 = time.perf_counter()
    ttft, tokens = await one_stream(session, target.url, *target.tagged(f"bq{order}z"))
    return Sample(run, order, ttft, tokens, time.perf_counter() - t0, t0)


async def engine_first_tokens(session: aiohttp.ClientSession, engine_url: str) -> dict[int, float]:
    """The engine's own time to first token (arrival to first token written) of the tagged requests
    it streamed since the last call, by tag (the reference engine's /debug/first-tokens)."""
    async with session.get(engine_url + "/debug/first-tokens") as r:
        taken = await r.json()
    return {int(m.group(1)): t["first_token"] - t["arrived"] for t in taken
            if (m := TAG.search(t["request_id"])) is not None}


async def measured_request(session: aiohttp.ClientSession, targets: list[Target], run: int, order: int,
                           overhead: OverheadSince) -> Sample:
    """One request at concurrency 1 with its own CPU. It starts on an idle proxy and engine (both
    settled first), so neither the previous request's tail nor a /metrics read overlaps its first
    token or lands in its CPU; the serving process is settled again after it. Its first-token
    overhead: the histogram read after it (the only request in flight)."""
    before = {pid: await settled_cpu(pid) for pid in sorted({t.pid for t in targets})}
    target = targets[run]
    c0, t0 = time.process_time(), time.perf_counter()
    ttft, tokens = await one_stream(session, target.url, *target.tagged(f"bq{order}z"))
    seconds, client_cpu = time.perf_counter() - t0, time.process_time() - c0
    cpu = await settled_cpu(target.pid) - before[target.pid]
    buckets = await overhead.read() if run else {}
    return Sample(run, order, ttft, tokens, seconds, t0, cpu=cpu, client_cpu=client_cpu, buckets=buckets)


async def mixed_phase(targets: list[Target], level: int, per_run: int, proxy_url: str, engine_url: str) -> list[Sample]:
    """The four runs interleaved request by request (`mixed_run`), so every run sees the same host
    speed and the same load. Each client sends whole cycles: every run gets the same number of
    requests, at least `per_run`. At concurrency 1 each request also gets its own CPU reading. Every
    request gets the engine's own time to first token (its engine request is tagged)."""
    cycles = -(-per_run // level)
    starts = itertools.count()
    samples: list[Sample] = []
    rng = random.Random(level)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=level)) as session:
        duration = await warm_up(session, targets)
        await engine_first_tokens(session, engine_url)  # forget what came before
        overhead = OverheadSince(session, proxy_url)
        if level == 1:
            await overhead.start()

        async def client(i: int) -> None:
            # spread the clients' starts over one request's duration: a steady state, not a burst
            await asyncio.sleep(duration * i / level + rng.uniform(0, duration / level))
            for k in range(4 * cycles):
                run = mixed_run(i, k)
                samples.append(await measured_request(session, targets, run, next(starts), overhead) if level == 1
                               else await timed_request(session, targets, run, next(starts)))

        await asyncio.gather(*(client(i) for i in range(level)))
        engine_ttfts = await engine_first_tokens(session, engine_url)
    for sample in samples:
        sample.engine_ttft = engine_ttfts.get(sample.order, math.nan)
    return samples


def rounds_of(samples: list[Sample], rounds: int) -> list[list[Sample]]:
    """The requests in `rounds` consecutive chunks by start order: stretches of time, each with
    every run in it (for the paired per-round ratios)."""
    ordered = sorted(samples, key=lambda s: s.order)
    size = len(ordered) / rounds
    return [ordered[round(r * size):round((r + 1) * size)] for r in range(rounds)]


def cpu_rate(samples: list[Sample]) -> float:
    cpu = sum(s.cpu for s in samples)
    return sum(s.tokens for s in samples) / cpu if cpu > 0 else math.nan


def mixed_cost(samples: list[Sample], chunks: list[list[Sample]], run: int) -> Cost:
    """At concurrency 1: the sums of the run's requests' own readings."""
    mine = [s for s in samples if s.run == run]
    return Cost("mixed, per request", len(mine), sum(s.tokens for s in mine), sum(s.cpu for s in mine),
                sum(s.seconds for s in mine), sum(s.client_cpu for s in mine),
                [cpu_rate([s for s in chunk if s.run == run]) for chunk in chunks],
                add_buckets([s.buckets for s in mine]))


def rotated(n: int, r: int) -> list[int]:
    return [(r + i) % n for i in range(n)]


def segment_cost(parts: list[dict]) -> Cost:
    return Cost("per-API segments", sum(len(p["ttfts"]) for p in parts), sum(p["tokens"] for p in parts),
                sum(p["cpu"] for p in parts), sum(p["wall"] for p in parts), sum(p["client_cpu"] for p in parts),
                [p["tokens"] / p["cpu"] if p["cpu"] > 0 else math.nan for p in parts],
                add_buckets([p["buckets"] for p in parts]))


async def segment_phase(targets: list[Target], level: int, per_run: int, rounds: int, proxy_url: str) -> list[Cost]:
    """The costs above concurrency 1, where a mixed load's proxy CPU cannot be told apart by API:
    `rounds` rounds of per-run segments (the level's clients all calling one run), their order
    rotated each round (in a fixed order one run always follows the direct run, an idle proxy, and
    another always runs last: a bias as large as the 10% compared). A segment's CPU is the serving
    process's (the engine's for direct) between settled readings around it."""
    parts: list[list[dict]] = [[] for _ in targets]
    async with aiohttp.ClientSession() as session:
        overhead = OverheadSince(session, proxy_url)
        await overhead.start()
        for r in range(rounds):
            for run in rotated(len(targets), r):
                target = targets[run]
                cpu0 = await settled_cpu(target.pid)
                part = await run_level(target.url, target.body, level, max(per_run // rounds, level))
                part["cpu"] = await settled_cpu(target.pid) - cpu0
                part["buckets"] = await overhead.read() if run else {}
                parts[run].append(part)
    return [segment_cost(p) for p in parts]


def capped(target: Target, tokens: int) -> Target:
    """The same request with its answer capped at `tokens` (each API's own field)."""
    body = orjson.loads(target.body)
    if "sampling_params" in body:  # direct: the GenerateRequest
        body["sampling_params"]["max_tokens"] = tokens
    else:
        body["max_output_tokens" if "input" in body else "max_tokens"] = tokens
    return Target(target.name, target.url, orjson.dumps(body), target.pid, target.tag_in_body)


def sample_cpu(pids: list[int], every: float, readings: list[tuple[float, list[float]]],
               stop: asyncio.Event) -> asyncio.Task:
    """A task reading the processes' CPU seconds every `every` seconds until `stop` (and once after)."""
    async def sample() -> None:
        while True:
            readings.append((time.perf_counter(), [cpu_seconds(pid) for pid in pids]))
            if stop.is_set():
                return
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass
    return asyncio.create_task(sample())


async def per_api_proxies_phase(targets: list[Target], level: int, per_run: int, rounds: int,
                                engine_url: str) -> list[Cost]:
    """The APIs' costs above concurrency 1 (not direct's: that is the engine's), each API in its own
    proxy process: the mixed phase with the chat completions, responses and messages requests sent
    to three proxies alike (the same flags, pinned to the same CPU), so each API's CPU is its
    process's while all see the same host speed and load, request by request. Rounds: the phase cut into `rounds` stretches of time, each API's CPU
    in a stretch (interpolated between readings 0.25 s apart) against the tokens it streamed there."""
    pids = [t.pid for t in targets[1:]]
    readings: list[tuple[float, list[float]]] = []
    resumed(pids)
    async with aiohttp.ClientSession() as session:
        overheads = [OverheadSince(session, t.url.split("/v1/")[0]) for t in targets[1:]]
        for overhead in overheads:
            await overhead.start()
        stop = asyncio.Event()
        sampler = sample_cpu(pids, 0.25, readings, stop)
        samples = await mixed_phase(targets, level, per_run, "", engine_url)
        stop.set()
        await sampler
        buckets = [await overhead.read() for overhead in overheads]
    stopped(pids)
    # the measured stretch: the first request sent to the last one ended (not the warm-up before it)
    begin, end = min(s.start for s in samples), max(s.start + s.seconds for s in samples)
    bounds = [begin + (end - begin) * r / rounds for r in range(rounds + 1)]
    costs = []
    for i, run in enumerate(range(1, len(targets))):
        mine = [s for s in samples if s.run == run]
        round_rates = []
        for a, b in zip(bounds, bounds[1:]):
            cpu = cpu_at(readings, b, i) - cpu_at(readings, a, i)
            round_rates.append(tokens_in(mine, a, b) / cpu if cpu > 0 else math.nan)
        # pooled: the stretch's CPU (the readings around it; after - before adds the warm-up's)
        cpu = cpu_at(readings, end, i) - cpu_at(readings, begin, i)
        costs.append(Cost("per-API proxies, interleaved", len(mine), sum(s.tokens for s in mine), cpu,
                          sum(s.seconds for s in mine), math.nan, round_rates, buckets[i]))
    return costs


def stopped(pids: list[int]) -> None:
    """Freeze the per-API proxies between their phases: idle, each still wakes several times a
    second (its event-loop lag probe, engine health checks) on the measured proxy's CPU."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def resumed(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGCONT)


async def measure_level(targets: list[Target], level: int, per_run: int, rounds: int, proxy_url: str,
                        first_token_requests: int, engine_url: str,
                        per_api_targets: list[Target] | None = None) -> list[Run]:
    """TTFT from the mixed phase; the costs from it too at concurrency 1 (one request in flight,
    each its own reading), from the per-API segments above. At concurrency 1 the TTFTs come from a
    first-token phase instead (`first_token_requests` per run, when > 0): a 48-request p50's
    standard error there is ~9% of the added TTFT compared, as large as the 10% judged."""
    samples = await mixed_phase(targets, level, per_run, proxy_url, engine_url)
    chunks = rounds_of(samples, rounds)
    costs = ([mixed_cost(samples, chunks, run) for run in range(len(targets))] if level == 1
             else await segment_phase(targets, level, per_run, rounds, proxy_url))
    judged: list[Cost | None] = [None] * len(targets)
    if level > 1 and per_api_targets is not None:
        judged = [None, *await per_api_proxies_phase(per_api_targets, level, per_run, rounds, engine_url)]
    phase = "mixed"
    if level == 1 and first_token_requests > 0:
        phase = "first-token"
        samples = await mixed_phase([capped(t, FIRST_TOKEN_CAP) for t in targets], 1, first_token_requests,
                                    proxy_url, engine_url)
        chunks = rounds_of(samples, rounds)
    return [Run(target.name, sorted(s.ttft for s in samples if s.run == run),
                [p50_or_nan([s.ttft for s in chunk if s.run == run]) for chunk in chunks], costs[run], phase,
                own_ttfts([s for s in samples if s.run == run]),
                [p50_or_nan(own_ttfts([s for s in chunk if s.run == run])) for chunk in chunks], judged[run])
            for run, target in enumerate(targets)]


def pinned(cpus: set[int] | None):
    """A preexec_fn that binds the child (all its future threads) to `cpus`."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


async def request_bodies(proxy_url: str) -> tuple[bytes, list[tuple[str, str, bytes]]]:
    """The direct GenerateRequest (the proxy's own render of the chat request) and the same
    conversation through each front door: (row label, path, body)."""
    chat = {"model": "tiny-qwen3", "messages": MESSAGES, "tools": TOOLS, "stream": True,
            "stream_options": {"include_usage": True}}
    async with aiohttp.ClientSession() as s:
        async with s.post(proxy_url + "/v1/chat/completions/render", json=chat) as r:
            rendered = await r.json()
    rendered["sampling_params"]["output_kind"] = 1
    rendered["model"] = None
    apis = [("chat completions", "/v1/chat/completions", orjson.dumps(chat)),
            ("responses", "/v1/responses", orjson.dumps({"model": "tiny-qwen3", "input": MESSAGES,
                                                         "tools": RESPONSES_TOOLS, "stream": True,
                                                         "store": False})),
            ("messages", "/v1/messages", orjson.dumps({"model": "tiny-qwen3", "max_tokens": 4096,
                                                       "messages": MESSAGES, "tools": ANTHROPIC_TOOLS,
                                                       "stream": True}))]
    return orjson.dumps(rendered), apis


async def main_async(args: argparse.Namespace, token_delay_ms: float, per_level: int, min_requests: int) -> str:
    exe = [sys.executable, "-m", "proxy.cli"]
    engine_port, proxy_port = free_port(), free_port()
    tmp = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    replies = tmp / "replies.json"
    replies.write_text(orjson.dumps([REPLY]).decode())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_VERBOSITY": "error"}
    proxy_cpus, other_cpus = cpu_sets(args.pin)
    if other_cpus is not None:
        os.sched_setaffinity(0, other_cpus)  # this client shares its CPUs with the engine
    engine = subprocess.Popen([*exe, "reference-engine", "--port", str(engine_port), "--replies", str(replies),
                               "--served-model-name", "tiny-qwen3", "--log-level", "warning",
                               "--token-delay-ms", str(token_delay_ms)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=pinned(other_cpus))
    proxy_exe = [sys.executable, os.environ["BENCH_PROXY_RUNNER"]] if os.environ.get("BENCH_PROXY_RUNNER") else exe

    def start_proxy(port: int) -> subprocess.Popen:
        return subprocess.Popen([*proxy_exe, "serve", "--port", str(port), "--served-model-name", "tiny-qwen3",
                                 "--engine-url", f"http://127.0.0.1:{engine_port}", "--tool-call-parser", "hermes",
                                 "--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--no-access-log",
                                 "--log-level", "warning"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                preexec_fn=pinned(proxy_cpus))

    proxy = start_proxy(proxy_port)
    # above concurrency 1, one more proxy per API (the same flags and CPU) for the interleaved costs
    per_api_ports = [free_port() for _ in range(3)] if max(args.levels) > 1 else []
    per_api_proxies = [start_proxy(port) for port in per_api_ports]
    engine_url, proxy_url = f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{proxy_port}"
    try:
        await wait_up(engine_url)
        for url in (proxy_url, *(f"http://127.0.0.1:{port}" for port in per_api_ports)):
            await wait_up(url)
        direct_body, apis = await request_bodies(proxy_url)
        direct = Target("direct", engine_url + "/inference/v1/generate", direct_body, engine.pid)
        targets = [direct, *(Target(name, proxy_url + path, body, proxy.pid, path == "/v1/responses")
                             for name, path, body in apis)]
        per_api_targets = None
        if per_api_proxies:
            per_api_targets = [direct, *(Target(name, f"http://127.0.0.1:{port}{path}", body, p.pid,
                                                path == "/v1/responses")
                                         for (name, path, body), port, p in zip(apis, per_api_ports, per_api_proxies))]
        # one request per front door first: the first Messages request runs the renderer's per-model
        # probes (tens of ms, once per process), which are no part of the steady state measured here
        async with aiohttp.ClientSession() as session:
            for target in targets[1:] + (per_api_targets or [])[1:]:
                await one_stream(session, target.url, target.body)
        stopped([p.pid for p in per_api_proxies])
        rows = []
        for level in args.levels:
            runs = await measure_level(targets, level, max(level * per_level, min_requests), args.rounds, proxy_url,
                                       args.first_token_requests, engine_url, per_api_targets)
            log_level(level, runs)
            rows.append((level, runs))
    finally:
        resumed([p.pid for p in per_api_proxies])
        for p in (proxy, *per_api_proxies, engine):
            p.send_signal(signal.SIGTERM)
        for p in (proxy, *per_api_proxies, engine):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
    return table(rows, token_delay_ms, per_level, min_requests, args.rounds)


def section_in_fresh_process(args: argparse.Namespace, paced: bool) -> str:
    """One table, measured by a new client process. Run after the zero-delay table in the same
    client, the paced concurrency-128 TTFT came out 100+ ms high in two full runs (direct fine,
    proxied not), and normal when the paced table ran alone; each table now gets a clean client."""
    out = Path(tempfile.mkdtemp(prefix="bench-loop-section-")) / "section.md"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--section", "paced" if paced else "zero",
           "--levels", *map(str, args.levels), "--requests-per-level", str(args.requests_per_level),
           "--paced-delay-ms", str(args.paced_delay_ms),
           "--paced-requests-per-level", str(args.paced_requests_per_level),
           "--paced-min-requests", str(args.paced_min_requests), "--rounds", str(args.rounds),
           "--first-token-requests", str(args.first_token_requests),
           "--min-requests", str(args.min_requests),
           "--pin" if args.pin else "--no-pin", "--out", str(out)]
    subprocess.run(cmd, check=True)
    return out.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 32, 128])
    parser.add_argument("--requests-per-level", type=int, default=6)
    # a zero-delay request takes milliseconds: enough of them that each round's p50 at concurrency 1
    # is worth comparing (the rounds' ratios to chat spread 0.6-1.3 with 5 requests a round)
    parser.add_argument("--min-requests", type=int, default=128)
    parser.add_argument("--paced-delay-ms", type=float, default=10.0,
                        help="second run with the engine at this delay per token (0: skip it)")
    parser.add_argument("--paced-requests-per-level", type=int, default=6)
    # at concurrency 1 a level has few requests: the added-TTFT p50s of the four runs need this many
    # each to be compared within 10% (a paced request streams for seconds)
    parser.add_argument("--paced-min-requests", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=8,
                        help="the paired ratios' rounds: the mixed phase cut into this many by start order; above "
                             "concurrency 1 the per-API segments run in this many rounds, their order rotated")
    parser.add_argument("--first-token-requests", type=int, default=192,
                        help="concurrency 1's TTFTs from this many requests per run with answers capped at "
                             f"{FIRST_TOKEN_CAP} tokens (0: from the mixed phase's)")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=len(os.sched_getaffinity(0)) >= 2,
                        help="the proxy alone on the last CPU, the engine and the client on the others")
    parser.add_argument("--section", choices=["all", "zero", "paced"], default="all",
                        help="one table only (in this process); `all` runs each in a fresh process")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "loop.md"))
    args = parser.parse_args()
    if args.section == "zero":
        text = asyncio.run(main_async(args, 0.0, args.requests_per_level, args.min_requests))
    elif args.section == "paced":
        text = asyncio.run(main_async(args, args.paced_delay_ms, args.paced_requests_per_level,
                                      args.paced_min_requests))
    else:
        sections = [header(args.pin, len(REPLY)), section_in_fresh_process(args, paced=False)]
        if args.paced_delay_ms > 0:
            sections.append(section_in_fresh_process(args, paced=True))
        text = "\n".join(sections)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
