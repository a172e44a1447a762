"""Measure vLLM 0.33's streaming derender cost, the baseline issues 3 and 4 compare against.

A ~2k-token assistant output (reasoning, content, a hermes tool call; real Qwen3 token ids)
is streamed one token per call through POST /v1/chat/completions/derender on the hermes +
qwen3 server (8110), echoing vLLM's stream_state, over one keep-alive connection. The same
tokens are also derendered in one non-streaming call, and streamed on the plain server
(8111, no parsers) for reference. Writes tests/fixtures/oracle/timing.json.

Machine note: the numbers depend on the host; the file records nproc and the CPU model.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import FIXTURE_DIR, Tok, post, pretty, version  # noqa: E402
from record_parsers import TOOLS  # noqa: E402

PARSERS, PLAIN = 8110, 8111
QWEN, IM_END = "tiny-qwen3", 151645
TARGET = int(os.environ.get("TIMING_TOKENS", "2000"))
CHAT = "/v1/chat/completions/derender"


def build_output(tok: Tok) -> tuple[str, list[int]]:
    sentence = ("The user asks about the weather in Paris, so I consider the forecast, the "
                "season, typical temperatures and whether a tool call is needed. ")
    reasoning = ""
    while len(tok.ids(reasoning)) < int(TARGET * 0.6):
        reasoning += sentence
    content = ""
    para = "Paris in spring is mild, with showers and sunny spells; pack a light jacket. "
    call = ('\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
            '"unit": "c"}}\n</tool_call>')
    while True:
        text = "<think>\n" + reasoning + "\n</think>\n\n" + content + call
        ids = tok.ids(text)
        if len(ids) + 1 >= TARGET:
            break
        content += para
    ids = ids + [IM_END]
    return text, ids


def stream(port: int, req: dict[str, Any], prompt: list[int], ids: list[int]) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    state, times, agg = None, [], {"content": "", "reasoning": "", "tool_args": ""}
    last_body_len = last_state_len = 0
    t_start = time.perf_counter()
    for i, t in enumerate(ids):
        last = i == len(ids) - 1
        chunk = {"request_id": "generate-tokens-chatcmpl-timing", "output_mode": "tokens",
                 "choices": [{"index": 0, "token_ids": [t], "finish_reason": "stop" if last else None,
                              "stop_reason": IM_END if last else None}]}
        body = json.dumps({"stream": True, "model": QWEN, "generate_chunk": chunk,
                           "stream_state": state, "prompt_token_ids": prompt,
                           "prompt_tokens": len(prompt), "chat_request": req}).encode()
        t0 = time.perf_counter()
        conn.request("POST", CHAT, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        times.append((time.perf_counter() - t0) * 1000)
        if resp.status != 200:
            raise RuntimeError(data[:500])
        out = json.loads(data)
        state = out["stream_state"]
        last_body_len, last_state_len = len(body), len(json.dumps(state))
        for ch in out["chunk"]["choices"]:
            d = ch["delta"]
            agg["content"] += d.get("content") or ""
            agg["reasoning"] += d.get("reasoning") or ""
            for tc in d.get("tool_calls") or []:
                agg["tool_args"] += (tc.get("function") or {}).get("arguments") or ""
    total = time.perf_counter() - t_start
    conn.close()
    k = max(1, len(times) // 10)
    first, lastp = times[:k], times[-k:]
    return {"calls": len(times), "total_s": round(total, 3),
            "per_call_ms_first_10pct_mean": round(statistics.mean(first), 3),
            "per_call_ms_first_10pct_median": round(statistics.median(first), 3),
            "per_call_ms_last_10pct_mean": round(statistics.mean(lastp), 3),
            "per_call_ms_last_10pct_median": round(statistics.median(lastp), 3),
            "last_over_first_mean": round(statistics.mean(lastp) / statistics.mean(first), 2),
            "per_call_ms_overall_mean": round(statistics.mean(times), 3),
            "last_request_body_bytes": last_body_len, "last_stream_state_bytes": last_state_len,
            "per_call_ms_every_100th": [round(x, 2) for x in times[::100]],
            "aggregate_lengths": {k2: len(v) for k2, v in agg.items()}}


def main() -> None:
    load_start = os.getloadavg()
    tok = Tok(QWEN)
    text, ids = build_output(tok)
    req = {"model": QWEN, "messages": [{"role": "user", "content": "Weather in Paris?"}],
           "tools": TOOLS, "stream": True}
    st, g = post(PARSERS, "/v1/chat/completions/render", req)
    prompt = g["token_ids"]
    nreq = dict(req, stream=False)
    body = {"model": QWEN, "generate_response": {"request_id": "generate-tokens-chatcmpl-timing",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop", "stop_reason": IM_END}]},
            "prompt_token_ids": prompt, "prompt_tokens": len(prompt), "chat_request": nreq}
    post(PARSERS, CHAT, body)  # warm-up
    nonstream = []
    for _ in range(5):
        t0 = time.perf_counter()
        st, resp = post(PARSERS, CHAT, body)
        nonstream.append((time.perf_counter() - t0) * 1000)
        assert st == 200, resp
    print("non-streaming done", flush=True)
    parsed = stream(PARSERS, req, prompt, ids)
    print("parser stream done", parsed["total_s"], flush=True)
    st, gp = post(PLAIN, "/v1/chat/completions/render", {"model": QWEN, "messages": req["messages"]})
    plain = stream(PLAIN, {"model": QWEN, "messages": req["messages"], "stream": True},
                   gp["token_ids"], ids)
    print("plain stream done", plain["total_s"], flush=True)
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    doc = {"topic": "timing", "description": "vLLM 0.33 derender timings: a hermes+qwen3 stream "
           "of one token per call (the replay cost grows with the output), the same tokens "
           "non-streamed, and the plain (no parser) stream for reference. Client: one keep-alive "
           "HTTP connection, sequential calls; times are client-side round trips.",
           "vllm_versions": [version(PARSERS)],
           "recorded": {"script": "tests/oracle/record_timing.py",
                        "date": time.strftime("%Y-%m-%d", time.gmtime())},
           "machine": {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
                       "loadavg_1_5_15_at_start": [round(x, 2) for x in load_start],
                       "loadavg_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()],
                       "note": "shared machine: other processes (tests, other servers) ran at the same "
                               "time; compare against a bench run made in the same conditions"},
           "servers": {"q3-hermes-qwen3": {"vllm_version": version(PARSERS), "kind": "render",
                                            "model": QWEN, "port_when_recorded": PARSERS,
                                            "command": "vllm launch render tiny-qwen3 --tool-call-parser "
                                                       "hermes --reasoning-parser qwen3 --enable-auto-tool-choice"},
                       "q3-plain": {"vllm_version": version(PLAIN), "kind": "render", "model": QWEN,
                                    "port_when_recorded": PLAIN,
                                    "command": "vllm launch render tiny-qwen3"}},
           "output": {"tokens": len(ids), "prompt_tokens": len(prompt),
                      "text_chars": len(text), "ends_with": "hermes tool call + <|im_end|>"},
           "parser_stream_one_token_per_call": parsed,
           "nonstream_parser_ms": {"runs": [round(x, 2) for x in nonstream],
                                   "median": round(statistics.median(nonstream), 2)},
           "plain_stream_one_token_per_call": plain,
           "cases": []}
    path = FIXTURE_DIR / "timing.json"
    path.write_text(pretty(doc) + "\n", encoding="utf-8")
    print("wrote", path)


if __name__ == "__main__":
    main()
