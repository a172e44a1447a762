"""Record the tokens-only engine's exact wire format (issue 5).

Engine: vLLM 0.32 ``vllm serve tiny-qwen3 --tokens-only`` on 8200 (the 0.33 wheel has no CPU
kernels). GenerateRequests are rendered by the vLLM 0.33 plain render server on 8111, then
sent to the engine; streaming answers are stored both parsed and as the raw SSE text (also
written to tests/fixtures/oracle/generate_sse/<case>.txt). The engine has random weights, so
the sampled tokens are noise; only the format matters.

Writes tests/fixtures/oracle/generate.json. Case fields besides the common ones:
``response_raw`` (exact body text), ``response_headers`` (content-type etc.), ``events`` (the
parsed SSE payloads, ``[DONE]`` excluded) and, for aborts, ``abort`` (the abort call).
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import FIXTURE_DIR, Recorder, post, sse_payloads  # noqa: E402
from oracle_client import http as http_call  # noqa: E402

ENGINE, RENDER = 8200, 8111
QWEN = "tiny-qwen3"
GEN = "/inference/v1/generate"
SCRIPT = "tests/oracle/record_generate.py"
SSE_DIR = FIXTURE_DIR / "generate_sse"
KEEP_HEADERS = ("content-type", "transfer-encoding", "content-length", "x-request-id")


def headers_of(h: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in h.items() if k.lower() in KEEP_HEADERS}


def render_chat(req: dict[str, Any]) -> dict[str, Any]:
    st, g = post(RENDER, "/v1/chat/completions/render", req)
    assert st == 200, g
    return g


def render_completion(req: dict[str, Any]) -> list[dict[str, Any]]:
    st, g = post(RENDER, "/v1/completions/render", req)
    assert st == 200, g
    return g


def raw_post(path: str, body: Any, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, str, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", ENGINE, timeout=600)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    conn.request("POST", path, body=raw if raw is not None else json.dumps(body).encode(),
                 headers=hdrs)
    resp = conn.getresponse()
    text = resp.read().decode("utf-8")
    h = dict(resp.getheaders())
    conn.close()
    return resp.status, text, h


class GenRecorder(Recorder):
    def gen(self, name: str, body: Any, description: str, headers: dict[str, str] | None = None,
            raw: bytes | None = None, path: str = GEN, **extra: Any) -> dict[str, Any]:
        status, text, h = raw_post(path, body, headers, raw)
        case: dict[str, Any] = {"name": name, "server": "q3-engine", "description": description,
                                "method": "POST", "path": path, "request": body}
        if headers:
            case["request_headers"] = headers
        if raw is not None:
            case["request_raw"] = raw.decode()
        case["status"] = status
        case["response_headers"] = headers_of(h)
        case["response_raw"] = text
        ctype = h.get("content-type", h.get("Content-Type", ""))
        if "text/event-stream" in ctype:
            case["events"] = sse_payloads(text)
            case["response"] = None
            SSE_DIR.mkdir(parents=True, exist_ok=True)
            (SSE_DIR / f"{name}.txt").write_text(text, encoding="utf-8")
        else:
            try:
                case["response"] = json.loads(text)
            except ValueError:
                case["response"] = text
        case.update(extra)
        return self.add(case)


def abort_case(r: GenRecorder, name: str, req: dict[str, Any], description: str,
               abort_path: str = "/inference/v1/abort_requests", after_events: int = 3,
               use_id: str | None = None) -> None:
    """Stream a long generation, abort it after a few events, record both sides."""
    conn = http.client.HTTPConnection("127.0.0.1", ENGINE, timeout=600)
    conn.request("POST", GEN, body=json.dumps(req).encode(),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    buf, events, abort = b"", 0, None
    engine_id = use_id or "generate-tokens-" + req["request_id"]
    t0 = time.time()
    while True:
        line = resp.readline()
        if not line:
            break
        buf += line
        if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
            events += 1
            if events == after_events and abort is None:
                body = {"request_ids": [engine_id]}
                st, text, h = raw_post(abort_path, body)
                abort = {"path": abort_path, "request": body, "status": st,
                         "response_raw": text, "response_headers": headers_of(h),
                         "sent_after_events": after_events}
        if time.time() - t0 > 120:
            break
    conn.close()
    text = buf.decode("utf-8")
    SSE_DIR.mkdir(parents=True, exist_ok=True)
    (SSE_DIR / f"{name}.txt").write_text(text, encoding="utf-8")
    r.add({"name": name, "server": "q3-engine", "description": description, "method": "POST",
           "path": GEN, "request": req, "status": resp.status,
           "response_headers": headers_of(dict(resp.getheaders())), "response_raw": text,
           "events": sse_payloads(text), "response": None, "abort": abort})


def main() -> None:
    r = GenRecorder("generate", "Wire format of POST /inference/v1/generate (vLLM 0.32 "
                    "--tokens-only engine, tiny-qwen3, random weights), abort_requests and /health. "
                    "Requests were rendered by vLLM 0.33's render server.", SCRIPT)
    r.server("q3-engine", ENGINE, QWEN, ["--served-model-name tiny-qwen3"], kind="engine")
    r.server("q3-plain", RENDER, QWEN, ["--served-model-name tiny-qwen3"])

    # health / models / version
    for path in ("/health", "/v1/models", "/version"):
        st, data, h = http_call(ENGINE, path, method="GET")
        r.add({"name": "get_" + path.strip("/").replace("/", "_"), "server": "q3-engine",
               "description": f"GET {path}", "method": "GET", "path": path, "request": None,
               "status": st, "response_headers": headers_of(h),
               "response": data})

    base = {"model": QWEN, "messages": [{"role": "user", "content": "Tell me a story."}],
            "temperature": 1.0, "seed": 1234, "max_tokens": 6}

    def chat(**kw: Any) -> dict[str, Any]:
        g = render_chat({**base, **kw})
        return g

    r.gen("nonstream_basic", chat(), "non-streaming, max_tokens 6 -> finish length")
    r.gen("nonstream_n3", chat(n=3), "non-streaming n=3")
    r.gen("nonstream_logprobs", chat(logprobs=True, top_logprobs=2), "non-streaming logprobs k=2")
    r.gen("nonstream_logprobs_0", chat(logprobs=True, top_logprobs=0), "non-streaming logprobs k=0")
    r.gen("nonstream_return_token_ids", chat(return_token_ids=True), "return_token_ids")
    r.gen("nonstream_eos", chat(logit_bias={"151645": 100}),
          "EOS forced by logit_bias: EOS inside token_ids, finish stop, stop_reason = EOS id")
    r.gen("nonstream_stop_token_ids", chat(logit_bias={"9707": 100}, stop_token_ids=[9707]),
          "stop_token_ids [9707] (forced): the id is in token_ids, stop_reason 9707")
    r.gen("nonstream_min_tokens", chat(logit_bias={"151645": 100}, min_tokens=3),
          "min_tokens 3 holds EOS back")
    r.gen("nonstream_ignore_eos", chat(logit_bias={"151645": 100}, ignore_eos=True, max_tokens=3),
          "ignore_eos: EOS ids generated, finish length")
    r.gen("nonstream_kv_transfer", chat(kv_transfer_params={"do_remote_decode": False}),
          "kv_transfer_params given in the request")
    r.gen("nonstream_x_request_id", chat(), "X-Request-Id header replaces the body request_id",
          headers={"X-Request-Id": "my-req-42"})
    r.gen("nonstream_max_tokens_1", chat(max_tokens=1), "max_tokens 1")

    sopt = {"include_usage": True}
    r.gen("stream_basic", chat(stream=True), "streaming, no stream_options")
    r.gen("stream_include_usage", chat(stream=True, stream_options=sopt),
          "include_usage: a final usage-only event")
    r.gen("stream_continuous_usage", chat(stream=True, stream_options={
        "include_usage": True, "continuous_usage_stats": True}), "continuous_usage_stats")
    r.gen("stream_n2", chat(stream=True, n=2, stream_options=sopt), "n=2 interleaving")
    r.gen("stream_n3_continuous", chat(stream=True, n=3, stream_options={
        "include_usage": True, "continuous_usage_stats": True}),
        "n=3 with continuous usage (per-index cumulative completion_tokens)")
    r.gen("stream_logprobs", chat(stream=True, logprobs=True, top_logprobs=2),
          "streaming logprobs k=2")
    r.gen("stream_return_token_ids", chat(stream=True, return_token_ids=True, stream_options=sopt),
          "return_token_ids: prompt_token_ids on the first event only")
    r.gen("stream_eos", chat(stream=True, logit_bias={"151645": 100}, stream_options=sopt),
          "EOS: a single event with the EOS id, finish stop, stop_reason EOS")
    r.gen("stream_stop_token_ids", chat(stream=True, logit_bias={"9707": 100}, stop_token_ids=[9707]),
          "stop_token_ids")
    r.gen("stream_min_tokens_eos", chat(stream=True, logit_bias={"151645": 100}, min_tokens=2),
          "min_tokens 2 then EOS")
    r.gen("stream_max_tokens_1_n2", chat(stream=True, max_tokens=1, n=2, stream_options=sopt),
          "one token each, n=2")

    # completions render -> generate
    [cg] = render_completion({"model": QWEN, "prompt": "Once upon a time", "temperature": 1.0,
                              "seed": 5, "max_tokens": 5})
    r.gen("completion_nonstream", cg, "completions-rendered request, non-streaming")
    [cgs] = render_completion({"model": QWEN, "prompt": [1, 2, 3], "temperature": 1.0, "seed": 5,
                               "max_tokens": 4, "stream": True, "logprobs": 1,
                               "stream_options": {"include_usage": True}})
    r.gen("completion_stream_logprobs", cgs, "completions-rendered request with token-id prompt, "
          "streaming, logprobs 1")

    # errors
    g = chat()
    g_stop = json.loads(json.dumps(g))
    g_stop["sampling_params"]["stop"] = ["\n"]
    r.gen("error_stop_strings", g_stop, "sampling_params.stop on --tokens-only: 400")
    gs = dict(g_stop, stream=True)
    r.gen("error_stop_strings_stream", gs, "the same while streaming: 400 before any SSE")
    g_t = json.loads(json.dumps(g))
    g_t["sampling_params"]["temperature"] = 3.0
    r.gen("error_temperature", g_t, "temperature 3.0")
    g_top = json.loads(json.dumps(g))
    g_top["sampling_params"]["top_p"] = 0.0
    r.gen("error_top_p_zero", g_top, "top_p 0")
    g_mt = json.loads(json.dumps(g))
    g_mt["sampling_params"]["max_tokens"] = 0
    r.gen("error_max_tokens_0", g_mt, "max_tokens 0")
    g_min = json.loads(json.dumps(g))
    g_min["sampling_params"]["min_tokens"] = 10
    r.gen("error_min_tokens_gt_max", g_min, "min_tokens 10 > max_tokens 6")
    r.gen("error_empty_token_ids", dict(g, token_ids=[]), "token_ids []")
    r.gen("error_negative_token_id", dict(g, token_ids=[1, -1]), "a negative prompt id")
    r.gen("error_missing_sampling_params", {k: v for k, v in g.items() if k != "sampling_params"},
          "no sampling_params")
    r.gen("error_output_mode_text", dict(g, output_mode="text"), "output_mode text on --tokens-only")
    r.gen("error_output_mode_derender_stream", dict(g, output_mode="derender", stream=True),
          "output_mode derender with stream")
    r.gen("error_unknown_model", dict(g, model="nope"), "unknown model name in the GenerateRequest")
    r.gen("unknown_sampling_key_dropped", dict(g, sampling_params=dict(g["sampling_params"], bogus=1)),
          "unknown sampling_params key: silently dropped")
    r.gen("sampling_params_minimal", {"token_ids": g["token_ids"], "sampling_params": {"max_tokens": 3}},
          "only token_ids and sampling_params {max_tokens: 3} (request_id generated, default temperature)")
    # NOT sent: a prompt id past the vocab ([1, 999999]) kills the 0.32 CPU engine (the worker
    # aborts with a C++ std::runtime_error and the whole server exits); see "known_crashes".
    r.gen("error_content_type", None, "text/plain content type", headers={"Content-Type": "text/plain"},
          raw=json.dumps(g).encode())
    r.gen("error_not_json", None, "body is not JSON", raw=b"{oops")
    r.gen("error_stream_options_without_stream", dict(g, stream_options={"include_usage": True}),
          "stream_options on a non-streaming request")
    r.gen("abort_missing_request_ids", {}, "abort without request_ids",
          path="/inference/v1/abort_requests")
    r.gen("abort_unknown_id", {"request_ids": ["generate-tokens-nope"]}, "abort of an unknown id",
          path="/inference/v1/abort_requests")
    r.gen("abort_legacy_route_unknown_id", {"request_ids": ["generate-tokens-nope"]},
          "the legacy /abort_requests route", path="/abort_requests")

    # aborts of live streams
    long_req = render_chat({**base, "max_tokens": 400, "stream": True,
                            "stream_options": {"include_usage": True}})
    abort_case(r, "stream_aborted", long_req, "a 400-token stream aborted through "
               "/inference/v1/abort_requests after 3 events (abort body uses the generate-tokens- id)")
    long_req2 = render_chat({**base, "max_tokens": 400, "stream": True})
    abort_case(r, "stream_aborted_legacy_route", long_req2, "aborted through the legacy "
               "/abort_requests route", abort_path="/abort_requests")
    long_req3 = render_chat({**base, "max_tokens": 400, "stream": True})
    abort_case(r, "stream_abort_with_render_id", long_req3, "abort with the bare render id "
               "(without the generate-tokens- prefix): does it stop?", use_id=long_req3["request_id"],
               after_events=2)
    nomax = render_chat({"model": QWEN, "messages": base["messages"], "temperature": 1.0,
                         "stream": True})
    abort_case(r, "stream_max_tokens_omitted_aborted", nomax,
               "max_tokens omitted: the engine would generate max_model_len - prompt tokens; "
               "aborted after 5 events", after_events=5)
    # non-streaming abort: run in a thread, abort, record
    ns = render_chat({**base, "max_tokens": 300})
    result: dict[str, Any] = {}

    def run() -> None:
        result["resp"] = raw_post(GEN, ns)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    st, text, h = raw_post("/inference/v1/abort_requests",
                           {"request_ids": ["generate-tokens-" + ns["request_id"]]})
    t.join(120)
    status, rtext, rh = result["resp"]
    r.add({"name": "nonstream_aborted", "server": "q3-engine", "method": "POST", "path": GEN,
           "description": "a non-streaming 300-token request aborted after 1 s",
           "request": ns, "status": status, "response_headers": headers_of(rh),
           "response_raw": rtext, "response": json.loads(rtext) if rtext.startswith("{") else rtext,
           "abort": {"path": "/inference/v1/abort_requests",
                     "request": {"request_ids": ["generate-tokens-" + ns["request_id"]]},
                     "status": st, "response_raw": text, "response_headers": headers_of(h)}})
    r.write(known_crashes=[{
        "request": "a GenerateRequest whose token_ids contain 999999 (>= vocab size 151936)",
        "effect": "vLLM 0.32 --tokens-only (CPU): the worker process dies (std::runtime_error, exit -6), "
                  "EngineCore reports a fatal error and the API server exits; the client sees the "
                  "connection reset. vLLM does not validate prompt ids against the vocab before scheduling.",
    }])


if __name__ == "__main__":
    main()
