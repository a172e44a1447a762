"""Derender benchmark: per-token CPU cost and per-call flatness of streaming derender.

    /work/venv/bin/python bench/derender.py            # writes bench/results/derender.md

(a) In-process: the per-choice streaming state machine (`ChatStreamDerenderer.step`, i.e.
    detokenize + build the chunk dict) plus `orjson.dumps` of the chunk, one token per step,
    measured at output positions 100, 1k and 8k. Target: <= 10 us per token, flat.
(b) HTTP: our `POST /v1/chat/completions/derender` with `stream: true`, one token per call for
    2k tokens, each call echoing the previous `stream_state` (what a router does). Reports the
    total time, the mean per-call time of the first and last 10% of calls, and the state size.
    Target: last/first <= 1.2, state <= 2 KB.

Scenarios are data (`SCENARIOS`): add one (e.g. a parser configuration and a reply with
reasoning and tool calls) and both parts run it. Everything runs on the embedded Qwen3
tokenizer; no GPU, no network beyond loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.derender import ChatStreamDerenderer, DerenderSettings  # noqa: E402
from core.model import ModelInfo  # noqa: E402
from core.protocol.chat import ChatCompletionRequest  # noqa: E402

PROMPT = [151644, 872, 198, 45764, 23811, 13, 151645, 198, 151644, 77091, 198]
PLAIN_TEXT = ("The derender step turns engine token ids back into OpenAI responses. 它必须在每个位置花费相同的时间。 "
              "Emoji 🎉 and accents é ü keep the byte-level merges honest, numbers 12345 too.\n")


@dataclass
class Scenario:
    name: str
    text: str                                        # the reply, repeated to the needed length
    chat_request: dict[str, Any] = field(default_factory=lambda: {"messages": [{"role": "user", "content": "hi"}]})
    server: dict[str, Any] = field(default_factory=dict)  # ServerConfig fields (parser flags)


SCENARIOS = [
    Scenario("plain", PLAIN_TEXT),
    # stop strings enforced while streaming (never matching here: the matcher's hold-back path)
    Scenario("stop strings", PLAIN_TEXT, {"messages": [{"role": "user", "content": "hi"}],
                                          "stop": ["</answer>", "\n\nUser:"]}),
]


def load_model() -> ModelInfo:
    from proxy.embedded import write_qwen3_model
    from proxy.model_loader import load_model as load

    return load(str(write_qwen3_model(Path(tempfile.mkdtemp()) / "qwen3")), served_model_names=["tiny-qwen3"])


def reply_ids(model: ModelInfo, scenario: Scenario, n: int) -> list[int]:
    ids: list[int] = []
    piece = model.tokenizer.encode(scenario.text)
    while len(ids) < n:
        ids.extend(piece)
    return ids[:n]


def settings_for(model: ModelInfo, scenario: Scenario) -> DerenderSettings:
    from proxy.config import ServerConfig

    return DerenderSettings.from_config(ServerConfig(**scenario.server), model)


# -- (a) in-process ------------------------------------------------------------------------

def bench_inprocess(model: ModelInfo, scenario: Scenario, positions=(100, 1000, 8000), window: int = 500,
                    repeats: int = 9) -> dict[int, float]:
    """Microseconds per token (step + chunk JSON) for the `window` tokens after each position.

    The minimum over repeats: the machine's other load only ever adds time."""
    settings = settings_for(model, scenario)
    request = ChatCompletionRequest.model_validate(scenario.chat_request)
    ids = reply_ids(model, scenario, max(positions) + window)
    results: dict[int, float] = {}
    for pos in positions:
        samples = []
        for _ in range(repeats):
            parser = ChatStreamDerenderer.build_parser(settings, request)
            d = ChatStreamDerenderer.start(settings, request, PROMPT, parser)
            for tid in ids[:pos]:
                d.step(0, [tid], None, None)
            gc.disable()
            t0 = time.perf_counter()
            for tid in ids[pos:pos + window]:
                choice = d.step(0, [tid], None, None)
                orjson.dumps({"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0,
                              "model": "tiny-qwen3", "choices": [choice]})
            samples.append((time.perf_counter() - t0) / window * 1e6)
            gc.enable()
        results[pos] = min(samples)
    return results


# -- (b) HTTP --------------------------------------------------------------------------------

async def bench_http(model: ModelInfo, scenario: Scenario, n_tokens: int = 2000) -> dict[str, Any]:
    import aiohttp
    from aiohttp import web

    from proxy.app import create_app
    from proxy.config import ServerConfig

    app = create_app(ServerConfig(**scenario.server), model)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}/v1/chat/completions/derender"
    ids = reply_ids(model, scenario, n_tokens)
    times: list[float] = []
    sizes: list[int] = []
    text_parts: list[str] = []
    try:
        async with aiohttp.ClientSession() as session:
            for warm in (True, False):  # a short warm-up stream first (connection, caches)
                times.clear(), sizes.clear(), text_parts.clear()
                total = await _stream(session, url, scenario, ids[:200] if warm else ids, times, sizes, text_parts)
    finally:
        await runner.cleanup()
    tenth = max(1, len(times) // 10)
    first, last_ = statistics.median(times[:tenth]), statistics.median(times[-tenth:])
    return {"tokens": len(ids), "total_s": total, "first_ms": first * 1e3, "last_ms": last_ * 1e3,
            "ratio": last_ / first, "state_max": max(sizes), "state_last": sizes[-1],
            "text_ok": "".join(text_parts) == model.tokenizer.decode(ids)}


async def _stream(session: Any, url: str, scenario: Scenario, ids: list[int], times: list[float],
                  sizes: list[int], text_parts: list[str]) -> float:
    state = None
    t_start = time.perf_counter()
    for n, tid in enumerate(ids):
        last = n == len(ids) - 1
        body = {"stream": True, "model": "tiny-qwen3", "stream_state": state,
                "prompt_token_ids": PROMPT if n == 0 else None, "chat_request": scenario.chat_request,
                "generate_chunk": {"request_id": "generate-tokens-chatcmpl-bench", "output_mode": "tokens",
                                   "choices": [{"index": 0, "token_ids": [tid],
                                                "finish_reason": "length" if last else None}]}}
        t0 = time.perf_counter()
        async with session.post(url, data=orjson.dumps(body),
                                headers={"Content-Type": "application/json"}) as resp:
            raw = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"call {n}: {resp.status} {raw[:300]!r}")
        times.append(time.perf_counter() - t0)
        out = orjson.loads(raw)
        state = out["stream_state"]
        sizes.append(len(state))
        for choice in out["chunk"]["choices"]:
            text_parts.append(choice["delta"].get("content") or "")
    return time.perf_counter() - t_start


# -- report ------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "derender.md"))
    parser.add_argument("--tokens", type=int, default=2000)
    args = parser.parse_args()
    model = load_model()
    lines = ["# Derender benchmark", "",
             f"`python bench/derender.py` on {time.strftime('%Y-%m-%d %H:%M')} (Qwen3 tokenizer, CPython "
             f"{sys.version.split()[0]}).", "",
             "## (a) In-process: streaming state machine step + chunk JSON, one token per step", "",
             "| scenario | us/token @100 | us/token @1k | us/token @8k | @8k / @100 |", "|---|---|---|---|---|"]
    inproc = {}
    for sc in SCENARIOS:
        r = bench_inprocess(model, sc)
        inproc[sc.name] = r
        lines.append(f"| {sc.name} | {r[100]:.2f} | {r[1000]:.2f} | {r[8000]:.2f} | {r[8000] / r[100]:.2f} |")
    lines += ["", f"## (b) HTTP: `/v1/chat/completions/derender` stream, one token per call, {args.tokens} calls", "",
              "| scenario | total s | first 10% ms/call | last 10% ms/call | last/first | state max B | text == decode |",
              "|---|---|---|---|---|---|---|"]
    for sc in SCENARIOS:
        r = asyncio.run(bench_http(model, sc, args.tokens))
        lines.append(f"| {sc.name} | {r['total_s']:.2f} | {r['first_ms']:.3f} | {r['last_ms']:.3f} | "
                     f"{r['ratio']:.2f} | {r['state_max']} | {r['text_ok']} |")
    lines += ["", "Targets: <= 10 us per token in-process and flat; last/first <= 1.2; stream_state <= 2 KB.", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
