"""Soak the front door: N streamed requests at concurrency C, and watch the proxy's memory.

    python bench/soak.py [--requests 45000] [--concurrency 64] [--cancel-every 7] [--store sqlite|redis]
                         [--out bench/results/soak.md]

Two processes on loopback, as in production: `derender-proxy reference-engine` and `derender-proxy
serve` in front of it with the hermes + qwen3 parsers; this client (aiohttp) keeps C streams
going until N have been sent. The mix, in turn: streamed chats with a tool call and reasoning
(usage included), streamed completions with stop strings and logprobs, streamed Responses
requests with the same tool (stored: `store` is OpenAI's default; in an SQLite store, or a real
Redis server with `--store redis`, bounded to `--store-max-bytes` so that it evicts during the
run), and streamed Anthropic messages with the tool and a stop sequence; every
`--cancel-every`th request a client that leaves after its first events (the proxy must abort the
engine request).

Reported: status counts (for 200s, whether the stream ended with its API's last event: `data:
[DONE]`, `response.completed` / `response.incomplete`, `message_stop`; and whether it carried an
error event), cancellations against the aborts the engine saw, throughput, and the
proxy's resident memory (VmRSS, sampled every `--sample-interval` seconds) and the store's size
(SQLite: its file and WAL on disk; Redis: its `used_memory`) as curves over the run: flat after
warm-up is the goal; growth in the second half of the run would be a leak.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import platform
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable
from typing import NamedTuple

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stack import PARSER_FLAGS, ROOT, publish, stack  # noqa: E402

sys.path.insert(0, str(ROOT))

from proxy.engine.sse import SSEDecoder  # noqa: E402
from proxy.store.redis import PREFIX as STORE_PREFIX  # noqa: E402
from tests.services.redis_server import redis_server  # noqa: E402

REPLY = ("<think>\nThe user wants the weather in Paris; I will call the tool.\n</think>\n\n"
         "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
         "</tool_call>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CHAT = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS,
        "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 200}
COMPLETION = {"model": "tiny-qwen3", "prompt": "Once upon a time", "stream": True, "max_tokens": 200,
              "stop": ["Paris\"}"], "logprobs": 2}
RESPONSES = {"model": "tiny-qwen3", "input": "Weather in Paris?", "stream": True, "max_output_tokens": 200,
             "tools": [{"type": "function", **TOOLS[0]["function"]}]}
MESSAGES = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Weather in Paris?"}], "stream": True,
            "max_tokens": 200, "stop_sequences": ["Paris\"}"],
            "tools": [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]}


class Route(NamedTuple):
    """One API of the mix: where it goes, its body, and how its stream ends well or badly (tests on
    one event's data)."""

    api: str
    path: str
    body: bytes
    done: Callable[[bytes], bool]
    error: Callable[[bytes], bool]


ROUTES = [
    Route("chat", "/v1/chat/completions", orjson.dumps(CHAT), lambda e: e == b"[DONE]",
          lambda e: e.startswith(b'{"error"')),
    Route("completions", "/v1/completions", orjson.dumps(COMPLETION), lambda e: e == b"[DONE]",
          lambda e: e.startswith(b'{"error"')),
    # (a Responses event's "type" is its last key)
    Route("responses", "/v1/responses", orjson.dumps(RESPONSES),
          lambda e: e.endswith((b'"type":"response.completed"}', b'"type":"response.incomplete"}')),
          lambda e: e.endswith((b'"type":"response.failed"}', b'"type":"error"}'))),
    Route("messages", "/v1/messages", orjson.dumps(MESSAGES), lambda e: e.startswith(b'{"type":"message_stop"'),
          lambda e: e.startswith(b'{"type":"error"')),
]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one(session: aiohttp.ClientSession, url: str, route: Route, cancel: bool) -> str:
    """One streamed request; its outcome: "200 done", "200 error-event", "200 cut", "cancelled",
    "<status>" or the client-side exception's name."""
    try:
        async with session.post(url + route.path, data=route.body,
                                headers={"Content-Type": "application/json"}) as resp:
            if resp.status != 200:
                await resp.read()
                return str(resp.status)
            decoder = SSEDecoder()
            events = 0
            error = done = False
            async for data in resp.content.iter_any():
                for event in decoder.feed(data):
                    events += 1
                    if route.done(event):
                        done = True
                    elif route.error(event):
                        error = True
                if cancel and events >= 2:
                    return "cancelled"  # leaving the `async with` drops the connection mid-stream
            return "200 error-event" if error else "200 done" if done else "200 cut"
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        return type(exc).__name__


class SQLiteProbe:
    """The embedded store: an SQLite file; its size is the file and its WAL on disk."""

    label = "SQLite file and WAL on disk"

    def __init__(self, directory: Path) -> None:
        self.path = directory / "responses.db"
        self.url = f"sqlite:///{self.path}"

    def size_mb(self) -> float:
        total = 0
        for path in self.path.parent.glob(self.path.name + "*"):
            with contextlib.suppress(FileNotFoundError):  # (the WAL comes and goes)
                total += path.stat().st_size
        return total / 2**20

    def records(self) -> tuple[int, int]:
        """(records, their bytes), as the store's own size bound counts them."""
        db = sqlite3.connect(self.path)
        try:
            return db.execute("SELECT count(*), coalesce(sum(size), 0) FROM responses").fetchone()
        finally:
            db.close()


class RedisProbe:
    """The replicas' store: a real Redis server; its size is Redis's `used_memory`."""

    label = "Redis used_memory"

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self.client = redis.Redis.from_url(url)

    def size_mb(self) -> float:
        return self.client.info("memory")["used_memory"] / 2**20

    def records(self) -> tuple[int, int]:
        index, total = f"{STORE_PREFIX}:index", f"{STORE_PREFIX}:bytes"  # (proxy/store/redis.py's keys)
        return self.client.zcard(index), int(self.client.get(total) or 0)


async def soak(args: argparse.Namespace, proxy_url: str, proxy_pid: int, engine_url: str,
               store: SQLiteProbe | RedisProbe) -> dict:
    outcomes: collections.Counter = collections.Counter()
    samples: list[tuple[float, int, float, float]] = []  # (seconds, requests finished, RSS MB, store MB)
    next_index = 0
    finished = 0
    t0 = time.monotonic()

    async def sampler() -> None:
        while True:
            samples.append((time.monotonic() - t0, finished, rss_mb(proxy_pid), store.size_mb()))
            await asyncio.sleep(args.sample_interval)

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index, finished
        while next_index < args.requests:
            i = next_index
            next_index += 1
            route = ROUTES[i % len(ROUTES)]
            cancel = args.cancel_every > 0 and i % args.cancel_every == args.cancel_every - 1
            outcomes[route.api, await one(session, proxy_url, route, cancel)] += 1
            finished += 1

    probe = asyncio.get_running_loop().create_task(sampler())
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency), timeout=timeout) as s:
        await asyncio.gather(*(worker(s) for _ in range(args.concurrency)))
    wall = time.monotonic() - t0
    await asyncio.sleep(1.0)  # let the last aborts land
    probe.cancel()
    samples.append((time.monotonic() - t0, finished, rss_mb(proxy_pid), store.size_mb()))
    async with aiohttp.ClientSession() as s:
        async with s.get(engine_url + "/debug/aborted") as r:
            aborted = await r.json()
        async with s.get(proxy_url + "/metrics") as r:
            metrics = await r.text()
    in_flight = next((line.split()[-1] for line in metrics.splitlines()
                      if line.startswith("derender_proxy_requests_in_flight ")), "?")
    aborts = {line.split('cause="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
              for line in metrics.splitlines() if line.startswith("derender_proxy_aborts_total{")}
    engine_errors = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                        if line.startswith("derender_proxy_engine_errors_total{"))
    return {"outcomes": outcomes, "samples": samples, "wall": wall, "aborted": aborted, "in_flight": in_flight,
            "aborts": aborts, "engine_errors": engine_errors}


def report(args: argparse.Namespace, result: dict) -> str:
    outcomes, samples = result["outcomes"], result["samples"]
    cancelled = sum(count for (_, outcome), count in outcomes.items() if outcome == "cancelled")
    apis = [route.api for route in ROUTES]
    kinds = sorted({outcome for _, outcome in outcomes})
    engine_aborts = len({a["request_id"] for a in result["aborted"]})
    rss = [s[2] for s in samples]
    half = [s[2] for s in samples if s[0] >= samples[-1][0] / 2]
    store_half = [s[3] for s in samples if s[0] >= samples[-1][0] / 2]
    records, record_bytes = result["store_records"]
    lines = [
        "# Soak (`bench/soak.py`)",
        "",
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs (Python "
        f"{platform.python_version()}); load average before the run {os.getloadavg()[0]:.1f}. The reference engine "
        f"(token delay {args.token_delay_ms:g} ms) and `derender-proxy serve` with the hermes + qwen3 parsers on "
        f"loopback; {args.requests} streamed requests at concurrency {args.concurrency}, in turn a chat with "
        "reasoning and a tool call (usage included), a completion with a stop string and logprobs, a Responses "
        f"request with the tool (stored, in {'a Redis' if args.store == 'redis' else 'an SQLite'} store bounded to "
        f"{args.store_max_bytes / 2**20:g} MiB), and an Anthropic message with the tool and a stop sequence; every "
        f"{args.cancel_every}th client leaves after its first events. A stream is done when it ends with its API's "
        "last event (`[DONE]`, `response.completed` / `response.incomplete`, `message_stop`).",
        "",
        "## Outcomes",
        "",
        "| API | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
        *(f"| {api} | " + " | ".join(str(outcomes.get((api, kind), 0)) for kind in kinds) + " |" for api in apis),
        "",
        f"The response store after the run: {records:,} responses, {record_bytes / 2**20:.1f} MiB of records (the "
        f"bound, `--response-store-max-bytes`, {args.store_max_bytes / 2**20:g} MiB, counts these), in "
        f"{samples[-1][3]:.1f} MiB of {result['store_label']} (its curve below: over the second half of the run "
        f"{min(store_half):.1f} to {max(store_half):.1f} MiB).",
        "",
        f"{args.requests / result['wall']:.0f} requests/s over {result['wall']:.0f} s. Clients that left: {cancelled}; "
        f"engine requests the engine saw aborted: {engine_aborts} (clients that left mid-generation, and stop strings "
        "and stop sequences that cut an answer short). Requests in flight at the proxy after the run: "
        f"{result['in_flight']} (the metrics scrape that counts them included). The proxy's aborts by cause: "
        + (", ".join(f"{cause} {count:.0f}" for cause, count in sorted(result["aborts"].items())) or "none")
        + f"; engine errors it counted: {result['engine_errors']:.0f}; lines it logged at ERROR or above: "
        f"{result['error_lines']}.",
        "",
        f"## Proxy memory (VmRSS) and the response store ({result['store_label']})",
        "",
        f"Start {rss[0]:.0f} MB, peak {max(rss):.0f} MB, end {rss[-1]:.0f} MB; over the second half of the run "
        f"{min(half):.0f} to {max(half):.0f} MB.",
        "",
        f"| seconds | requests finished | RSS MB | response store, {result['store_label']}, MiB |",
        "|---|---|---|---|",
    ]
    step = max(1, len(samples) // 20)
    for t, done, mb, store_mb in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        lines.append(f"| {t:.0f} | {done} | {mb:.1f} | {store_mb:.1f} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> str:
    work = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    replies = work / "replies.json"
    replies.write_text(orjson.dumps([REPLY]).decode())
    with contextlib.ExitStack() as resources:
        if args.store == "redis":
            store: SQLiteProbe | RedisProbe = RedisProbe(resources.enter_context(redis_server(work)).url)
        else:
            store = SQLiteProbe(work)
        store_flags = ["--response-store", store.url, "--response-store-max-bytes", str(args.store_max_bytes)]
        engine_flags = ["--replies", str(replies), "--token-delay-ms", str(args.token_delay_ms)]
        proxy_log = resources.enter_context((work / "proxy.log").open("wb"))
        running = resources.enter_context(stack(engine_flags, PARSER_FLAGS + store_flags, proxy_stderr=proxy_log))
        result = asyncio.run(soak(args, running.proxy_url, running.proxy.pid, running.engine_url, store))
        result["store_records"] = store.records()
        result["store_label"] = store.label
    # the proxy logs JSON lines at --log-level warning: a client that leaves must never be an error
    result["error_lines"] = sum(1 for line in (work / "proxy.log").read_text(errors="replace").splitlines()
                                if '"level":"error"' in line or '"level":"critical"' in line)
    return report(args, result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=45000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--cancel-every", type=int, default=7, help="every Kth client leaves mid-stream (0: none)")
    parser.add_argument("--token-delay-ms", type=float, default=2.0,
                        help="engine delay per token (streams long enough for clients to leave mid-generation)")
    parser.add_argument("--sample-interval", type=float, default=1.0)
    parser.add_argument("--store", choices=("sqlite", "redis"), default="sqlite",
                        help="the response store: the embedded SQLite file, or a real Redis server (redis-server)")
    parser.add_argument("--store-max-bytes", type=int, default=8 << 20,
                        help="the response store's bound (small, so that it evicts during the run)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak.md"))
    args = parser.parse_args()
    text = run(args)
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
