"""Soak the front door: N streamed requests at concurrency C, and watch the proxy's memory.

    python bench/soak.py [--requests 22500] [--concurrency 64] [--cancel-every 7] [--out bench/results/soak.md]

Two processes on loopback, as in production: `derender-proxy reference-engine` and `derender-proxy
serve` in front of it with the hermes + qwen3 parsers; this client (aiohttp) keeps C streams
going until N have been sent. The mix: streamed chats with a tool call and reasoning (usage
included), streamed completions with stop strings and logprobs, and every `--cancel-every`th
request a client that leaves after its first events (the proxy must abort the engine request).

Reported: status counts (for 200s, whether the stream ended with `data: [DONE]` and whether it
carried an error event), cancellations against the aborts the engine saw, throughput, and the
proxy's resident memory (VmRSS, sampled every `--sample-interval` seconds) as a curve over the
run: flat after warm-up is the goal; growth in the second half of the run would be a leak.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stack import PARSER_FLAGS, ROOT, publish, stack  # noqa: E402

sys.path.insert(0, str(ROOT))

from proxy.engine.sse import SSEDecoder  # noqa: E402

REPLY = ("<think>\nThe user wants the weather in Paris; I will call the tool.\n</think>\n\n"
         "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
         "</tool_call>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CHAT = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS,
        "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 200}
COMPLETION = {"model": "tiny-qwen3", "prompt": "Once upon a time", "stream": True, "max_tokens": 200,
              "stop": ["Paris\"}"], "logprobs": 2}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one(session: aiohttp.ClientSession, url: str, path: str, body: bytes, cancel: bool) -> str:
    """One streamed request; its outcome: "200 done", "200 error-event", "200 cut", "cancelled",
    "<status>" or the client-side exception's name."""
    try:
        async with session.post(url + path, data=body, headers={"Content-Type": "application/json"}) as resp:
            if resp.status != 200:
                await resp.read()
                return str(resp.status)
            decoder = SSEDecoder()
            events = 0
            error = done = False
            async for data in resp.content.iter_any():
                for event in decoder.feed(data):
                    events += 1
                    if event == b"[DONE]":
                        done = True
                    elif event.startswith(b'{"error"'):
                        error = True
                if cancel and events >= 2:
                    return "cancelled"  # leaving the `async with` drops the connection mid-stream
            return "200 error-event" if error else "200 done" if done else "200 cut"
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        return type(exc).__name__


async def soak(args: argparse.Namespace, proxy_url: str, proxy_pid: int, engine_url: str) -> dict:
    outcomes: collections.Counter = collections.Counter()
    samples: list[tuple[float, int, float]] = []  # (seconds, requests finished, RSS MB)
    bodies = [("/v1/chat/completions", orjson.dumps(CHAT)), ("/v1/completions", orjson.dumps(COMPLETION))]
    next_index = 0
    finished = 0
    t0 = time.monotonic()

    async def sampler() -> None:
        while True:
            samples.append((time.monotonic() - t0, finished, rss_mb(proxy_pid)))
            await asyncio.sleep(args.sample_interval)

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index, finished
        while next_index < args.requests:
            i = next_index
            next_index += 1
            path, body = bodies[i % len(bodies)]
            cancel = args.cancel_every > 0 and i % args.cancel_every == args.cancel_every - 1
            outcomes[await one(session, proxy_url, path, body, cancel)] += 1
            finished += 1

    probe = asyncio.get_running_loop().create_task(sampler())
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency), timeout=timeout) as s:
        await asyncio.gather(*(worker(s) for _ in range(args.concurrency)))
    wall = time.monotonic() - t0
    await asyncio.sleep(1.0)  # let the last aborts land
    probe.cancel()
    samples.append((time.monotonic() - t0, finished, rss_mb(proxy_pid)))
    async with aiohttp.ClientSession() as s:
        async with s.get(engine_url + "/debug/aborted") as r:
            aborted = await r.json()
        async with s.get(proxy_url + "/metrics") as r:
            metrics = await r.text()
    in_flight = next((line.split()[-1] for line in metrics.splitlines()
                      if line.startswith("derender_proxy_requests_in_flight ")), "?")
    return {"outcomes": outcomes, "samples": samples, "wall": wall, "aborted": aborted, "in_flight": in_flight}


def report(args: argparse.Namespace, result: dict) -> str:
    outcomes, samples = result["outcomes"], result["samples"]
    cancelled = outcomes.get("cancelled", 0)
    engine_aborts = len({a["request_id"] for a in result["aborted"]})
    rss = [s[2] for s in samples]
    half = [s[2] for s in samples if s[0] >= samples[-1][0] / 2]
    lines = [
        "# Soak (`bench/soak.py`)",
        "",
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs (Python "
        f"{platform.python_version()}); load average before the run {os.getloadavg()[0]:.1f}. The reference engine "
        f"(token delay {args.token_delay_ms:g} ms) and `derender-proxy serve` with the hermes + qwen3 parsers on "
        f"loopback; {args.requests} streamed requests at concurrency {args.concurrency}, alternating a chat with "
        "reasoning and a tool call (usage included) and a completion with a stop string and logprobs; every "
        f"{args.cancel_every}th client leaves after its first events.",
        "",
        "## Outcomes",
        "",
        "| outcome | requests |",
        "|---|---|",
        *(f"| {name} | {count} |" for name, count in sorted(outcomes.items())),
        "",
        f"{args.requests / result['wall']:.0f} requests/s over {result['wall']:.0f} s. Clients that left: {cancelled}; "
        f"engine requests the engine saw aborted: {engine_aborts} (clients that left mid-generation, and stop strings "
        f"that cut a completion short). Requests in flight at the proxy after the run: {result['in_flight']} (the "
        "metrics scrape that counts them included).",
        "",
        "## Proxy memory (VmRSS)",
        "",
        f"Start {rss[0]:.0f} MB, peak {max(rss):.0f} MB, end {rss[-1]:.0f} MB; over the second half of the run "
        f"{min(half):.0f} to {max(half):.0f} MB.",
        "",
        "| seconds | requests finished | RSS MB |",
        "|---|---|---|",
    ]
    step = max(1, len(samples) // 20)
    for t, done, mb in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        lines.append(f"| {t:.0f} | {done} | {mb:.1f} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> str:
    replies = Path(tempfile.mkdtemp(prefix="bench-soak-")) / "replies.json"
    replies.write_text(orjson.dumps([REPLY]).decode())
    with stack(["--replies", str(replies), "--token-delay-ms", str(args.token_delay_ms)], PARSER_FLAGS) as running:
        result = asyncio.run(soak(args, running.proxy_url, running.proxy.pid, running.engine_url))
    return report(args, result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=22500)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--cancel-every", type=int, default=7, help="every Kth client leaves mid-stream (0: none)")
    parser.add_argument("--token-delay-ms", type=float, default=2.0,
                        help="engine delay per token (streams long enough for clients to leave mid-generation)")
    parser.add_argument("--sample-interval", type=float, default=1.0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak.md"))
    args = parser.parse_args()
    text = run(args)
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
