"""Record vLLM 0.33's streaming derender (plain path) as golden call sequences (issue 3).

Writes tests/fixtures/oracle/derender_stream.json. Each case feeds engine chunks one call at
a time to POST /v1/chat/completions/derender or /v1/completions/derender with
``stream: true``, echoing the returned ``stream_state``, and records every request/response
pair. Chunks are either built from real token ids (tokenized texts) in the engine's exact
SSE payload shape, or taken verbatim from the real 0.32 tokens-only engine's SSE (port 8200).

The parser path (hermes + qwen3) is recorded by record_parsers.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, Tok, post, post_sse, sse_payloads  # noqa: E402
from record_derender import lp_legacy, lp_new  # noqa: E402

Q3_PLAIN, L3_PLAIN, ENGINE = 8111, 8112, 8200
QWEN, LLAMA = "tiny-qwen3", "tiny-llama3"
IM_END = 151645
EOT = 128009
RID = "generate-tokens-chatcmpl-00112233aabbccdd"
CRID = "generate-tokens-cmpl-44556677eeff0011"
SCRIPT = "tests/oracle/record_derender_stream.py"
CHAT = "/v1/chat/completions/derender"
COMP = "/v1/completions/derender"
q3 = Tok(QWEN)
l3 = Tok(LLAMA)


def chunk(ids: list[int], finish: str | None = None, stop_reason: Any = None, index: int = 0,
          logprobs: Any = None, usage: dict[str, Any] | None = None, rid: str = RID,
          prompt_token_ids: list[int] | None = None) -> dict[str, Any]:
    """One generate SSE payload, shaped exactly like the engine's."""
    c: dict[str, Any] = {"request_id": rid, "usage": usage}
    if prompt_token_ids is not None:
        c["prompt_token_ids"] = prompt_token_ids
    c["output_mode"] = "tokens"
    c["choices"] = [{"index": index, "finish_reason": finish, "stop_reason": stop_reason,
                     "token_ids": ids, "routed_experts": None, "sampling_mask": None,
                     "weight_versions": None, "logprobs": logprobs}]
    return c


def usage_chunk(p: int, c: int, rid: str = RID) -> dict[str, Any]:
    return {"request_id": rid, "usage": {"prompt_tokens": p, "total_tokens": p + c,
                                         "completion_tokens": c},
            "output_mode": "tokens", "choices": []}


def split(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def chunks_for(ids: list[int], size: int, finish: str = "stop", stop_reason: Any = None,
               **kw: Any) -> list[dict[str, Any]]:
    parts = split(ids, size)
    out = []
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        out.append(chunk(p, finish if last else None, stop_reason if last else None, **kw))
    return out


def bodies(chunks: list[dict[str, Any]], req_key: str, req: dict[str, Any] | None,
           prompt: list[int] | None, model: str = QWEN, prompt_every_call: bool = False,
           prompt_tokens: int | None = None) -> list[dict[str, Any]]:
    out = []
    for i, c in enumerate(chunks):
        b: dict[str, Any] = {"stream": True, "model": model, "generate_chunk": c,
                             "stream_state": "ECHO"}
        if prompt is not None and (i == 0 or prompt_every_call):
            b["prompt_token_ids"] = prompt
        if prompt_tokens is not None:
            b["prompt_tokens"] = prompt_tokens
        if req is not None:
            b[req_key] = req
        out.append(b)
    return out


def main() -> None:
    r = Recorder("derender_stream", "Streaming derender (plain path: chat without parsers and "
                 "completions) call sequences of vLLM 0.33; each call echoes the previous "
                 "stream_state.", SCRIPT)
    P = r.server("q3-plain", Q3_PLAIN, QWEN, ["--served-model-name tiny-qwen3"])
    L = r.server("l3-plain-256", L3_PLAIN, LLAMA, ["--served-model-name tiny-llama3",
                 "--max-model-len 256"])
    E = r.server("q3-engine-032", ENGINE, QWEN, ["--served-model-name tiny-qwen3"], kind="engine")

    chat = {"model": QWEN, "messages": [{"role": "user", "content": "Say hello."}], "stream": True,
            "stream_options": {"include_usage": True}}
    st, g = post(Q3_PLAIN, "/v1/chat/completions/render", chat)
    prompt = g["token_ids"]
    text = "Hello there! 世界 😀🎉 naïve ok."
    ids = q3.ids(text) + [IM_END]
    n_out = len(ids)

    seq = chunks_for(ids, 1, "stop", IM_END) + [usage_chunk(len(prompt), n_out)]
    r.stream("chat_per_token_eos_usage", P, CHAT, bodies(seq, "chat_request", chat, prompt,
                                                          prompt_tokens=len(prompt)),
             "one token per call, EOS in the last chunk with stop_reason, then a usage-only chunk; "
             "prompt_token_ids on the first call only", text=text)
    seq = chunks_for(ids, 1, "stop", IM_END)
    r.stream("chat_per_token_prompt_every_call", P, CHAT,
             bodies(seq, "chat_request", chat, prompt, prompt_every_call=True),
             "prompt_token_ids on every call, no prompt_tokens", text=text)
    seq = chunks_for(ids, 3, "stop", IM_END)
    r.stream("chat_chunks_of_3", P, CHAT, bodies(seq, "chat_request", chat, prompt),
             "three tokens per chunk (emoji bytes split across chunks)", text=text)
    seq = chunks_for(ids, 4, "stop", None)
    r.stream("chat_eos_null_stop_reason", P, CHAT, bodies(seq, "chat_request", chat, prompt),
             "EOS last with stop_reason null (dropped, stop_reason stays null)", text=text)
    seq = [usage_chunk(len(prompt), 0)] + chunks_for(ids, 5, "stop", IM_END)
    r.stream("chat_usage_chunk_first", P, CHAT, bodies(seq, "chat_request", chat, prompt),
             "a usage-only chunk before any choice: the role goes on the first chunk with a choice")
    hello = q3.ids("Hello there, friend")
    seq = chunks_for(hello, 2, "length") + [chunk([], "length")]
    seq[-2]["choices"][0]["finish_reason"] = None
    r.stream("chat_finish_only_chunk", P, CHAT, bodies(seq, "chat_request", chat, prompt),
             "the finish arrives in a chunk with empty token_ids")
    seq = [chunk(hello[:2]), chunk([], None), chunk(hello[2:], "length")]
    r.stream("chat_empty_delta_chunk", P, CHAT, bodies(seq, "chat_request", chat, prompt),
             "a chunk with no ids and no finish in the middle")
    cont = []
    for i, p in enumerate(split(ids, 3)):
        last = i == len(split(ids, 3)) - 1
        done = sum(len(x) for x in split(ids, 3)[:i + 1])
        cont.append(chunk(p, "stop" if last else None, IM_END if last else None,
                          usage={"prompt_tokens": len(prompt), "total_tokens": len(prompt) + done,
                                 "completion_tokens": done}))
    cont.append(usage_chunk(len(prompt), n_out))
    creq = dict(chat, stream_options={"include_usage": True, "continuous_usage_stats": True})
    r.stream("chat_continuous_usage", P, CHAT, bodies(cont, "chat_request", creq, prompt),
             "usage on every chunk (continuous_usage_stats) and no prompt_tokens in the body")
    r.stream("chat_continuous_usage_prompt_tokens_override", P, CHAT,
             bodies(cont, "chat_request", creq, prompt, prompt_tokens=7),
             "prompt_tokens 7 in the body overrides the chunk's usage.prompt_tokens")
    # logprobs
    lp_text = "The cat 😀 sat."
    lids = q3.ids(lp_text)
    lpn = lp_new(lids, 3)["content"]
    seq = [chunk([t], "length" if i == len(lids) - 1 else None,
                 logprobs={"content": [lpn[i]]}) for i, t in enumerate(lids)]
    r.stream("chat_logprobs_top2", P, CHAT,
             bodies(seq, "chat_request", dict(chat, logprobs=True, top_logprobs=2), prompt),
             "0.33-shape logprobs one token per chunk, cut to top_logprobs 2; emoji bytes", text=lp_text)
    seq2 = [chunk(lids[i:i + 2], "length" if i + 2 >= len(lids) else None,
                  logprobs={"content": lpn[i:i + 2]}) for i in range(0, len(lids), 2)]
    sp_text = "a🫠b𓀀c鱻 🦩."
    sids = q3.ids(sp_text)
    spl = lp_new(sids, 2)["content"]
    seq = [chunk([t], "length" if i == len(sids) - 1 else None,
                 logprobs={"content": [spl[i]]}) for i, t in enumerate(sids)]
    r.stream("chat_split_utf8_per_token_logprobs", P, CHAT,
             bodies(seq, "chat_request", dict(chat, logprobs=True, top_logprobs=1), prompt),
             "characters split over 2-3 byte-level tokens, one token per call: text held back "
             "until complete; logprob token strings repaired with the carried context ids",
             text=sp_text)
    seq = [chunk([t], "length" if i == len(sids) - 1 else None, rid=CRID,
                 logprobs={"content": [spl[i]]}) for i, t in enumerate(sids)]
    r.stream("completion_split_utf8_per_token_logprobs", P, COMP,
             bodies(seq, "completion_request", {"model": QWEN, "prompt": "x", "stream": True,
                                                "logprobs": 1}, None),
             "completions: split characters one token per call, logprobs and text_offset",
             text=sp_text)
    r.stream("chat_logprobs_chunks_of_2_no_cut", P, CHAT,
             bodies(seq2, "chat_request", chat, prompt),
             "logprobs in chunks of 2, chat_request without logprobs: all candidates")
    lpl = lp_legacy(lids, 2)["content"]
    seq3 = [chunk(lids[:2], None, logprobs={"content": lpl[:2]}),
            chunk(lids[2:], "length", logprobs={"content": lpl[2:]})]
    r.stream("chat_logprobs_legacy", P, CHAT,
             bodies(seq3, "chat_request", dict(chat, logprobs=True, top_logprobs=1), prompt),
             "legacy 'token_id:N' logprobs in a stream chunk")
    # token ids / special tokens / stop ids
    seq = chunks_for(ids, 4, "stop", IM_END)
    seq[0]["prompt_token_ids"] = prompt
    r.stream("chat_return_token_ids", P, CHAT,
             bodies(seq, "chat_request", dict(chat, return_token_ids=True), prompt),
             "return_token_ids: per-chunk token_ids, prompt_token_ids from the first generate chunk")
    spec_ids = q3.ids("Hi") + [151644] + q3.ids("user") + [IM_END] + q3.ids(" ok") + [IM_END]
    r.stream("chat_skip_special_false", P, CHAT,
             bodies(chunks_for(spec_ids, 1, "stop", IM_END), "chat_request",
                    dict(chat, skip_special_tokens=False), prompt),
             "skip_special_tokens false: special tokens in content, the final EOS still dropped")
    stop_ids = q3.ids("one two three") + [13]
    r.stream("chat_stop_token_ids_request", P, CHAT,
             bodies(chunks_for(stop_ids, 2, "stop", None), "chat_request",
                    dict(chat, stop_token_ids=[13]), prompt),
             "request stop_token_ids [13], stop_reason null in the chunk")
    r.stream("chat_no_chat_request", P, CHAT,
             bodies(chunks_for(ids, 2, "stop", IM_END), "chat_request", None, prompt),
             "no chat_request at all (plain server)")
    mseq = chunks_for(hello, 2, "length")
    for c in mseq:
        c["metrics"] = {"arrival_time": 1796030209.5, "num_generation_tokens": 2}
        c["kv_transfer_params"] = {"do_remote_decode": True}
    r.stream("chat_metrics_kv_in_chunks", P, CHAT, bodies(mseq, "chat_request", chat, prompt),
             "generate chunks carrying metrics and kv_transfer_params")
    r.stream("completion_metrics_kv_in_chunks", P, COMP,
             bodies([dict(c, request_id=CRID) for c in mseq], "completion_request",
                    {"model": QWEN, "prompt": "x", "stream": True}, None),
             "completions: generate chunks carrying metrics and kv_transfer_params")
    # n = 2: one state per index, interleaved
    a_ids = q3.ids("Alpha beta gamma.") + [IM_END]
    b_ids = q3.ids("Uno dos tres cuatro")
    order = [(0, a_ids[0:1]), (1, b_ids[0:2]), (0, a_ids[1:3]), (1, b_ids[2:3]), (0, a_ids[3:]),
             (1, b_ids[3:])]
    calls, states = [], {0: None, 1: None}
    n2req = dict(chat, n=2, temperature=1.0)
    for k, (idx, part) in enumerate(order):
        last = (idx == 0 and part == a_ids[3:]) or (idx == 1 and part == b_ids[3:])
        fin = ("stop" if idx == 0 else "length") if last else None
        sr = IM_END if (last and idx == 0) else None
        body = {"stream": True, "model": QWEN, "generate_chunk": chunk(part, fin, sr, index=idx),
                "stream_state": states[idx], "prompt_token_ids": prompt, "chat_request": n2req}
        st, resp = post(Q3_PLAIN, CHAT, body)
        calls.append({"request": body, "status": st, "response": resp})
        states[idx] = resp["stream_state"]
    body = {"stream": True, "model": QWEN, "generate_chunk": usage_chunk(len(prompt),
                                                                          len(a_ids) + len(b_ids)),
            "stream_state": states[0], "prompt_token_ids": prompt, "chat_request": n2req}
    st, resp = post(Q3_PLAIN, CHAT, body)
    calls.append({"request": body, "status": st, "response": resp})
    r.add({"name": "chat_n2_interleaved", "server": P, "method": "POST", "path": CHAT,
           "description": "n=2: chunks of index 0 and 1 interleave; the client keeps one "
                          "stream_state per index (each request carries that index's state); "
                          "the usage chunk is sent with index 0's state",
           "calls": calls})

    # Llama-3 seeding in the stream
    lchat = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "stream": True,
             "chat_template_kwargs": {"date_string": "26 Jul 2024"}}
    st, lg = post(L3_PLAIN, "/v1/chat/completions/render", lchat)
    lids2 = l3.ids(" world, again 😀") + [EOT]
    r.stream("llama_chat_seeded", L, CHAT,
             bodies(chunks_for(lids2, 1, "stop", EOT), "chat_request", lchat, lg["token_ids"],
                    model=LLAMA), "Llama-3 one token per call, seeded from the prompt")
    r.stream("llama_chat_unseeded", L, CHAT,
             bodies(chunks_for(lids2, 1, "stop", EOT), "chat_request", lchat, None, model=LLAMA),
             "Llama-3 without prompt_token_ids")

    # completions
    comp = {"model": QWEN, "prompt": "The capital of France is", "stream": True,
            "stream_options": {"include_usage": True}}
    st, cg = post(Q3_PLAIN, "/v1/completions/render", comp)
    cprompt = cg[0]["token_ids"]
    ctext = " Paris. 巴黎 😀 is nice"
    cids = q3.ids(ctext)
    clp = lp_new(cids, 3)["content"]
    seq = [chunk([t], "length" if i == len(cids) - 1 else None, rid=CRID,
                 logprobs={"content": [clp[i]]}) for i, t in enumerate(cids)]
    seq.append(usage_chunk(len(cprompt), len(cids), CRID))
    r.stream("completion_per_token_logprobs", P, COMP,
             bodies(seq, "completion_request", dict(comp, logprobs=1), cprompt),
             "completions one token per call with logprobs (cut to 2) and running text_offset, "
             "then a usage-only chunk", text=ctext)
    seq = [chunk(p, "length" if i == len(split(cids, 3)) - 1 else None, rid=CRID)
           for i, p in enumerate(split(cids, 3))]
    r.stream("completion_chunks_of_3_no_logprobs", P, COMP,
             bodies(seq, "completion_request", comp, cprompt),
             "chunks of 3 without logprobs", text=ctext)
    eos_ids = cids + [IM_END]
    r.stream("completion_eos_stop", P, COMP,
             bodies(chunks_for(eos_ids, 4, "stop", IM_END, rid=CRID), "completion_request",
                    comp, cprompt), "EOS at the end")
    r.stream("completion_skip_special_false", P, COMP,
             bodies(chunks_for(spec_ids, 2, "stop", IM_END, rid=CRID), "completion_request",
                    dict(comp, skip_special_tokens=False), cprompt), "special tokens kept")
    seq = chunks_for(cids, 3, "length", rid=CRID)
    seq[0]["prompt_token_ids"] = cprompt
    r.stream("completion_return_token_ids", P, COMP,
             bodies(seq, "completion_request", dict(comp, return_token_ids=True), cprompt),
             "return_token_ids")
    r.stream("completion_no_request", P, COMP,
             bodies(chunks_for(cids, 3, "length", rid=CRID), "completion_request", None, None),
             "no completion_request, no prompt ids")
    seq = [usage_chunk(len(cprompt), 0, CRID)] + chunks_for(cids, 4, "length", rid=CRID) + [
        chunk([], "length", rid=CRID)]
    seq[-2]["choices"][0]["finish_reason"] = None
    r.stream("completion_usage_first_finish_only", P, COMP,
             bodies(seq, "completion_request", comp, cprompt, prompt_tokens=3),
             "usage chunk first, then ids, then a finish-only chunk; prompt_tokens 3")

    # parser path (hermes + qwen3 on 8110): request/response plumbing around the parser
    X = r.server("q3-parsers", 8110, QWEN, ["--served-model-name tiny-qwen3", "--tool-call-parser hermes",
                 "--reasoning-parser qwen3", "--enable-auto-tool-choice"])
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    xchat = {"model": QWEN, "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": tools,
             "stream": True, "stream_options": {"include_usage": True}}
    st, xg = post(8110, "/v1/chat/completions/render", xchat)
    xprompt = xg["token_ids"]
    xtext = ("<think>\nCall the tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
             "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")
    xids = q3.ids(xtext) + [IM_END]
    seq = [usage_chunk(len(xprompt), 0)] + chunks_for(xids, 4, "stop", IM_END) + [
        usage_chunk(len(xprompt), len(xids))]
    r.stream("parser_usage_first_and_last", X, CHAT,
             bodies(seq, "chat_request", xchat, xprompt, prompt_every_call=True),
             "parser path: usage-only chunks before and after; role on the first chunk with a choice",
             text=xtext)
    r.stream("parser_prompt_every_call", X, CHAT,
             bodies(chunks_for(xids, 3, "stop", IM_END), "chat_request", xchat, xprompt, prompt_every_call=True),
             "parser path: prompt_token_ids on every call (required on every call here)", text=xtext)
    r.stream("parser_prompt_first_call_only", X, CHAT,
             bodies(chunks_for(xids, 3, "stop", IM_END), "chat_request", xchat, xprompt),
             "parser path: prompt_token_ids only on the first call: vLLM answers 400 on every later "
             "call (we accept it: docs/vllm-wire-spec.md §0.3)", text=xtext)
    xc = []
    parts = split(xids, 5)
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        done = sum(len(x) for x in parts[:i + 1])
        xc.append(chunk(p, "stop" if last else None, IM_END if last else None,
                        usage={"prompt_tokens": len(xprompt), "total_tokens": len(xprompt) + done,
                               "completion_tokens": done}, prompt_token_ids=xprompt if i == 0 else None))
    r.stream("parser_continuous_usage_return_token_ids", X, CHAT,
             bodies(xc, "chat_request", dict(xchat, return_token_ids=True, stream_options={
                 "include_usage": True, "continuous_usage_stats": True}), xprompt, prompt_every_call=True),
             "parser path: usage on every chunk, return_token_ids (prompt ids on the first generate chunk)",
             text=xtext)
    a_ids = xids
    b_ids = q3.ids("<think>\nNo tool.\n</think>\n\nIt is sunny.") + [IM_END]
    order, ia, ib = [], 0, 0
    while ia < len(a_ids) or ib < len(b_ids):
        if ia < len(a_ids):
            order.append((0, a_ids[ia:ia + 3]))
            ia += 3
        if ib < len(b_ids):
            order.append((1, b_ids[ib:ib + 2]))
            ib += 2
    calls, states = [], {0: None, 1: None}
    n2 = dict(xchat, n=2, temperature=1.0)
    seen = {0: 0, 1: 0}
    for idx, part in order:
        seen[idx] += len(part)
        total = len(a_ids) if idx == 0 else len(b_ids)
        last = seen[idx] == total
        body = {"stream": True, "model": QWEN,
                "generate_chunk": chunk(part, "stop" if last else None, IM_END if last else None, index=idx),
                "stream_state": states[idx], "prompt_token_ids": xprompt, "chat_request": n2}
        st, resp = post(8110, CHAT, body)
        calls.append({"request": body, "status": st, "response": resp})
        if st == 200:
            states[idx] = resp["stream_state"]
    r.add({"name": "parser_n2_interleaved", "server": X, "method": "POST", "path": CHAT,
           "description": "parser path, n=2: index 0 makes a tool call, index 1 answers with content; "
                          "one stream_state per index", "calls": calls})

    # real engine streams, derendered chunk by chunk
    for name, req, kind in [
            ("engine_chat_sampled", {"model": QWEN, "messages": [{"role": "user", "content": "Tell me a story"}],
                                     "stream": True, "max_tokens": 12, "temperature": 1.0, "seed": 7,
                                     "stream_options": {"include_usage": True}}, "chat"),
            ("engine_chat_n2_continuous", {"model": QWEN, "messages": [{"role": "user", "content": "Hi"}],
                                           "stream": True, "max_tokens": 6, "temperature": 1.0, "seed": 3,
                                           "n": 2, "logprobs": True, "top_logprobs": 1,
                                           "stream_options": {"include_usage": True,
                                                              "continuous_usage_stats": True}}, "chat"),
            ("engine_completion_logprobs", {"model": QWEN, "prompt": "Once upon a time", "stream": True,
                                            "max_tokens": 8, "temperature": 1.0, "seed": 11, "logprobs": 2,
                                            "return_token_ids": True,
                                            "stream_options": {"include_usage": True}}, "completion")]:
        rpath = "/v1/chat/completions/render" if kind == "chat" else "/v1/completions/render"
        st, gr = post(Q3_PLAIN, rpath, req)
        gr = gr if kind == "chat" else gr[0]
        st, raw, _ = post_sse(ENGINE, "/inference/v1/generate", gr)
        events = sse_payloads(raw)
        calls, states = [], {}
        path = CHAT if kind == "chat" else COMP
        key = "chat_request" if kind == "chat" else "completion_request"
        for ev in events:
            idx = ev["choices"][0]["index"] if ev["choices"] else 0
            body = {"stream": True, "model": QWEN, "generate_chunk": ev,
                    "stream_state": states.get(idx), "prompt_token_ids": gr["token_ids"],
                    "prompt_tokens": len(gr["token_ids"]), key: req}
            st, resp = post(Q3_PLAIN, path, body)
            calls.append({"request": body, "status": st, "response": resp})
            if st == 200:
                states[idx] = resp["stream_state"]
        r.add({"name": name, "server": P, "method": "POST", "path": path,
               "description": f"render on q3-plain, generate (stream) on the real 0.32 engine, each "
                              f"SSE event derendered in order (one state per choice index); "
                              f"engine_sse holds the raw SSE text",
               "engine_server": E, "render_response": gr, "engine_sse": raw, "calls": calls})
    r.write()


if __name__ == "__main__":
    main()
