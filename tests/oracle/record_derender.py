"""Record vLLM 0.33's derender answers (issue 3) as golden fixtures.

Writes, under tests/fixtures/oracle/:
  derender_chat.json            non-streaming POST /v1/chat/completions/derender
  derender_completions.json     non-streaming POST /v1/completions/derender
  derender_errors.json          every 4xx of docs/vllm-wire-spec.md §2.4 / 2.5 (status + exact body)
  derender_stream.json          streaming derender sequences (chat + completions)

Servers (see tests/oracle/README.md for how to start them):
  8111  vLLM 0.33 render, tiny-qwen3, no parser flags            ("q3-plain")
  8110  vLLM 0.33 render, tiny-qwen3, hermes + qwen3 + auto      ("q3-parsers")
  8112  vLLM 0.33 render, tiny-llama3, no parsers, max-model-len 256 ("l3-plain-256")

Engine outputs are built from real token ids (the model's tokenizer.json); logprob
values are synthetic but well-formed (the engine's 0.33 shape or the legacy shape).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, Tok, post  # noqa: E402

Q3_PLAIN, Q3_PARSERS, L3_PLAIN = 8111, 8110, 8112
QWEN, LLAMA = "tiny-qwen3", "tiny-llama3"
IM_END, ENDOFTEXT = 151645, 151643
EOT, EOM, EOTEXT = 128009, 128008, 128001
RID = "generate-tokens-chatcmpl-0123456789abcdef"
CRID = "generate-tokens-cmpl-fedcba9876543210"
SCRIPT = "tests/oracle/record_derender.py"

q3 = Tok(QWEN)
l3 = Tok(LLAMA)
L3_KW = {"date_string": "26 Jul 2024"}


def render_chat(port: int, req: dict[str, Any]) -> list[int]:
    st, g = post(port, "/v1/chat/completions/render", req)
    assert st == 200, g
    return g["token_ids"]


def render_completion(port: int, req: dict[str, Any]) -> list[list[int]]:
    st, g = post(port, "/v1/completions/render", req)
    assert st == 200, g
    return [x["token_ids"] for x in g]


def choice(ids: list[int] | None, finish: str | None = "stop", stop_reason: Any = None,
           index: int = 0, logprobs: Any = None, **extra: Any) -> dict[str, Any]:
    c = {"index": index, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": ids}
    if logprobs is not None:
        c["logprobs"] = logprobs
    c.update(extra)
    return c


def gen(choices: list[dict[str, Any]], rid: str = RID, **extra: Any) -> dict[str, Any]:
    g = {"request_id": rid, "output_mode": "tokens", "choices": choices}
    g.update(extra)
    return g


def full_gen(choices: list[dict[str, Any]], rid: str, prompt_len: int, model: str = QWEN,
             **extra: Any) -> dict[str, Any]:
    """A GenerateTokensResponse with every field, as the engine writes it."""
    ntok = sum(len(c.get("token_ids") or []) for c in choices)
    full = []
    for c in choices:
        fc = {"index": c["index"], "finish_reason": c["finish_reason"],
              "stop_reason": c.get("stop_reason"), "token_ids": c["token_ids"],
              "routed_experts": None, "sampling_mask": None,
              "weight_versions": [{"version": "default", "start": 0,
                                   "end": len(c["token_ids"] or [])}],
              "logprobs": c.get("logprobs")}
        full.append(fc)
    g = {"request_id": rid, "model": model, "created": 1796030209,
         "usage": {"prompt_tokens": prompt_len, "total_tokens": prompt_len + ntok,
                   "completion_tokens": ntok, "prompt_tokens_details": None,
                   "completion_tokens_details": None},
         "prompt_logprobs": None, "prompt_token_id_logprobs": None, "prompt_token_ids": None,
         "mm_placeholders": None, "metrics": None, "kv_transfer_params": None,
         "ec_transfer_params": None, "output_mode": "tokens", "choices": full}
    g.update(extra)
    return g


def alt_ids(tid: int, k: int) -> list[int]:
    """k plausible, distinct alternative ids (real vocab entries) for a sampled id."""
    pool = [220, 198, 13, 11, 279, 323, 264, 311, 315, 304, 9707, 21927]
    return [a for a in pool if a != tid][:k]


def lp_new(ids: list[int], k: int = 3, sampled_rank_1: tuple[int, ...] = ()) -> dict[str, Any]:
    """Logprobs in vLLM 0.33's generate shape: the sampled token first, then rank order."""
    content = []
    for pos, tid in enumerate(ids):
        base = -0.25 - 0.125 * pos
        if pos in sampled_rank_1 or pos % 2 == 0:
            # sampled token is the top candidate: k entries
            top = [{"token_id": tid, "logprob": base, "rank": 1}]
            top += [{"token_id": a, "logprob": base - 1.5 - j, "rank": j + 2}
                    for j, a in enumerate(alt_ids(tid, k - 1))]
            rank = 1
        else:
            # sampled token ranked 3rd: sampled first, then k ranked candidates (k+1 entries)
            alts = alt_ids(tid, k)
            top = [{"token_id": tid, "logprob": base - 2.0, "rank": 3}]
            top += [{"token_id": a, "logprob": base - 0.5 * j, "rank": j + 1}
                    for j, a in enumerate(alts)]
            rank = 3
        content.append({"token_id": tid, "logprob": top[0]["logprob"], "rank": rank,
                        "top_logprobs": top})
    return {"content": content}


def lp_legacy(ids: list[int], k: int = 3) -> dict[str, Any]:
    """The same values in the pre-0.30 ChatCompletionLogProbs shape ("token_id:N")."""
    new = lp_new(ids, k)
    content = []
    for e in new["content"]:
        content.append({"token": f"token_id:{e['token_id']}", "logprob": e["logprob"],
                        "bytes": None,
                        "top_logprobs": [{"token": f"token_id:{t['token_id']}",
                                          "logprob": t["logprob"], "bytes": None}
                                         for t in e["top_logprobs"]]})
    return {"content": content}


# ----------------------------------------------------------------- chat ------
def record_chat() -> None:
    r = Recorder("derender_chat", "Non-streaming POST /v1/chat/completions/derender answers of vLLM "
                 "0.33 (plain servers and the hermes+qwen3 parser server).", SCRIPT)
    P = r.server("q3-plain", Q3_PLAIN, QWEN, ["--served-model-name tiny-qwen3"])
    X = r.server("q3-parsers", Q3_PARSERS, QWEN, ["--served-model-name tiny-qwen3",
                 "--tool-call-parser hermes", "--reasoning-parser qwen3", "--enable-auto-tool-choice"])
    L = r.server("l3-plain-256", L3_PLAIN, LLAMA, ["--served-model-name tiny-llama3",
                 "--max-model-len 256"])
    path = "/v1/chat/completions/derender"

    chat = {"model": QWEN, "messages": [{"role": "user", "content": "Say hello."}]}
    prompt = render_chat(Q3_PLAIN, chat)

    def body(gr: dict[str, Any], creq: dict[str, Any] | None = chat, ptoks: Any = "auto",
             pids: Any = "auto", model: Any = QWEN) -> dict[str, Any]:
        b: dict[str, Any] = {}
        if model is not None:
            b["model"] = model
        b["generate_response"] = gr
        if ptoks == "auto":
            b["prompt_tokens"] = len(prompt)
        elif ptoks is not None:
            b["prompt_tokens"] = ptoks
        if pids == "auto":
            b["prompt_token_ids"] = prompt
        elif pids is not None:
            b["prompt_token_ids"] = pids
        if creq is not None:
            b["chat_request"] = creq
        return b

    hello = q3.ids("Hello there! How are you today?")
    r.call("plain_eos_stop_reason", P, path, body(gen([choice(hello + [IM_END], "stop", IM_END)])),
           "EOS <|im_end|> is the last id with stop_reason = its id (the engine's form): dropped from text, "
           "counted in completion_tokens")
    r.call("plain_full_engine_response", P, path,
           body(full_gen([choice(hello + [IM_END], "stop", IM_END)], RID, len(prompt))),
           "a GenerateTokensResponse with every field as the engine writes it")
    r.call("plain_eos_null_stop_reason_primary", P, path,
           body(gen([choice(hello + [IM_END], "stop", None)])),
           "primary EOS last with stop_reason null: dropped, stop_reason stays null")
    r.call("plain_eos_null_stop_reason_secondary", P, path,
           body(gen([choice(hello + [ENDOFTEXT], "stop", None)])),
           "generation-config EOS 151643 (not primary) last with stop_reason null")
    r.call("plain_stop_token_ids_request", P, path,
           body(gen([choice(hello + [13], "stop", None)]), dict(chat, stop_token_ids=[13])),
           "last id in chat_request.stop_token_ids, stop_reason null")
    r.call("plain_stop_reason_int_not_last", P, path,
           body(gen([choice(hello, "stop", IM_END)])),
           "stop_reason int that is not the last id: nothing dropped")
    r.call("plain_length_keeps_eos", P, path,
           body(gen([choice(hello + [IM_END], "length", None)])),
           "finish length: the last id (EOS) is kept and decoded (skip_special_tokens drops its text)")
    r.call("plain_length_eos_no_skip", P, path,
           body(gen([choice(hello + [IM_END], "length", None)]), dict(chat, skip_special_tokens=False)),
           "finish length, skip_special_tokens false: the EOS text shows")
    r.call("plain_ignore_eos", P, path,
           body(gen([choice(hello + [IM_END], "stop", None)]),
                dict(chat, ignore_eos=True, skip_special_tokens=False)),
           "ignore_eos: primary EOS last, stop_reason null")
    r.call("plain_include_stop_str_keeps_stop_token", P, path,
           body(gen([choice(hello + [IM_END], "stop", IM_END)]),
                dict(chat, include_stop_str_in_output=True, skip_special_tokens=False)),
           "include_stop_str_in_output: the stop token is not dropped")
    r.call("plain_finish_reason_omitted", P, path,
           body(gen([{"index": 0, "token_ids": hello}])),
           "choice without finish_reason / stop_reason (defaults)")
    r.call("plain_finish_abort", P, path, body(gen([choice(hello[:3], "abort", None)])),
           "finish_reason abort passed through")

    # stop strings
    one23 = q3.ids("one two three four five")
    r.call("stop_string_reason_given", P, path,
           body(gen([choice(one23, "stop", "three")])),
           "stop_reason is the string: cut before it")
    r.call("stop_string_from_request", P, path,
           body(gen([choice(one23, "stop", None)]), dict(chat, stop=["three"])),
           "stop_reason null, request stop list: cut, stop_reason becomes the string")
    r.call("stop_string_include", P, path,
           body(gen([choice(one23, "stop", "three")]), dict(chat, include_stop_str_in_output=True)),
           "include_stop_str_in_output keeps the stop string")
    r.call("stop_string_earliest_wins", P, path,
           body(gen([choice(one23, "stop", None)]), dict(chat, stop=["four", "two", "three"])),
           "several stop strings: the earliest-completing match wins")
    r.call("stop_string_tie_list_order", P, path,
           body(gen([choice(one23, "stop", None)]), dict(chat, stop=["wo thr", "two three"])),
           "two matches: earliest completing wins ('wo thr' completes first)")
    r.call("stop_string_length_not_cut", P, path,
           body(gen([choice(one23, "length", None)]), dict(chat, stop=["three"])),
           "finish length: no stop-string cut")
    r.call("stop_string_with_int_stop_reason", P, path,
           body(gen([choice(one23 + [IM_END], "stop", IM_END)]), dict(chat, stop=["three"])),
           "stop_reason int: no stop-string cut, only the token drop")
    r.call("stop_string_min_tokens_skips_early", P, path,
           body(gen([choice(q3.ids("one two one two one"), "stop", None)]),
                dict(chat, stop=["two"], min_tokens=3)),
           "min_tokens 3: a match ending inside the first 3 tokens does not count")
    r.call("stop_string_min_tokens_no_match_after", P, path,
           body(gen([choice(q3.ids("one two three"), "stop", None)]),
                dict(chat, stop=["two"], min_tokens=3)),
           "min_tokens 3 and the only match is inside them: text kept whole")
    r.call("stop_string_not_found", P, path,
           body(gen([choice(one23, "stop", None)]), dict(chat, stop=["seven"])),
           "stop list without a match")
    r.call("stop_string_spans_tokens", P, path,
           body(gen([choice(q3.ids("abcdefghij"), "stop", None)]), dict(chat, stop=["def"])),
           "stop string inside a multi-char token")

    # special tokens
    spec = q3.ids("Hi") + [151644] + q3.ids("user") + [IM_END] + q3.ids(" ok")
    r.call("special_tokens_skipped", P, path, body(gen([choice(spec, "length")])),
           "special tokens skipped by default")
    r.call("special_tokens_kept", P, path,
           body(gen([choice(spec, "length")]), dict(chat, skip_special_tokens=False)),
           "skip_special_tokens false")
    r.call("special_tokens_kept_no_spaces", P, path,
           body(gen([choice(spec, "length")]),
                dict(chat, skip_special_tokens=False, spaces_between_special_tokens=False)),
           "skip_special_tokens false, spaces_between_special_tokens false")
    r.call("out_of_vocab_id", P, path, body(gen([choice(hello[:2] + [151935, 200000] + hello[2:4],
                                                           "length")])),
           "ids past the tokenizer's vocab (151935 is a model-vocab pad slot, 200000 beyond)")

    # unicode
    uni = "Grüße, 世界! 😀🎉🫠 naïve café 日本語のテキスト 👨‍👩‍👧 𓀀 鱻"
    r.call("unicode_emoji_cjk", P, path, body(gen([choice(q3.ids(uni) + [IM_END], "stop", IM_END)])),
           "CJK, emoji (byte-fallback pieces), ZWJ sequence", text=uni)

    # logprobs
    lp_ids = q3.ids("The cat sat.")
    r.call("logprobs_new_top2", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_new(lp_ids, 3))]),
                dict(chat, logprobs=True, top_logprobs=2)),
           "0.33 shape input, chat_request top_logprobs 2: cut to 2")
    r.call("logprobs_new_top0", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_new(lp_ids, 3))]),
                dict(chat, logprobs=True)),
           "logprobs true, top_logprobs unset: cut to 0")
    r.call("logprobs_new_top_minus1", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_new(lp_ids, 3))]),
                dict(chat, logprobs=True, top_logprobs=-1)),
           "top_logprobs -1: all candidates")
    r.call("logprobs_new_logprobs_false", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_new(lp_ids, 3))])),
           "chat_request without logprobs: all candidates kept")
    r.call("logprobs_new_no_chat_request", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_new(lp_ids, 3))]), None),
           "no chat_request: all candidates kept")
    r.call("logprobs_legacy_top2", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_legacy(lp_ids, 3))]),
                dict(chat, logprobs=True, top_logprobs=2)),
           "legacy 'token_id:N' shape input")
    r.call("logprobs_legacy_no_chat_request", P, path,
           body(gen([choice(lp_ids, "length", logprobs=lp_legacy(lp_ids, 3))]), None),
           "legacy shape, no chat_request")
    emo = q3.ids("a🫠b𓀀c鱻")
    r.call("logprobs_byte_fallback_emoji", P, path,
           body(gen([choice(emo, "length", logprobs=lp_new(emo, 2))]),
                dict(chat, logprobs=True, top_logprobs=1)),
           "characters split over byte-level tokens: token strings / bytes per piece, U+FFFD repair")
    r.call("logprobs_with_eos_dropped", P, path,
           body(gen([choice(hello[:3] + [IM_END], "stop", IM_END,
                            logprobs=lp_new(hello[:3] + [IM_END], 2))]),
                dict(chat, logprobs=True, top_logprobs=1)),
           "EOS dropped from the text; its logprob entry?")
    missing = lp_new(lp_ids, 2)
    missing["content"][1] = {"token_id": lp_ids[1], "logprob": -9999.0, "rank": None,
                             "top_logprobs": []}
    r.call("logprobs_sampled_missing", P, path,
           body(gen([choice(lp_ids, "length", logprobs=missing)]),
                dict(chat, logprobs=True, top_logprobs=2)),
           "an entry with logprob -9999.0, rank null, no candidates (sampled id missing in the engine map)")

    # passthrough + token ids
    r.call("return_token_ids", P, path,
           body(gen([choice(hello + [IM_END], "stop", IM_END)], prompt_token_ids=prompt),
                dict(chat, return_token_ids=True)),
           "return_token_ids: choice token_ids and top-level prompt_token_ids (from generate_response)")
    r.call("return_token_ids_no_gen_prompt_ids", P, path,
           body(gen([choice(hello + [IM_END], "stop", IM_END)]), dict(chat, return_token_ids=True)),
           "return_token_ids without generate_response.prompt_token_ids")
    metrics = {"arrival_time": 1796030209.5, "first_token_latency": 0.012}
    r.call("passthrough_kv_metrics_prompt_logprobs", P, path,
           body(gen([choice(hello, "length")], kv_transfer_params={"do_remote_prefill": True,
                                                                  "remote_host": "10.0.0.1"},
                    metrics=metrics, prompt_logprobs=[None, None])),
           "kv_transfer_params, metrics (partial: unset keys come out null) and prompt_logprobs pass through")
    r.call("usage_prompt_tokens_omitted", P, path,
           body(gen([choice(hello, "length")]), ptoks=None),
           "prompt_tokens omitted: usage.prompt_tokens 0")
    r.call("model_omitted", P, path, body(gen([choice(hello, "length")]), model=None),
           "no model: served name")
    r.call("n2_choices", P, path,
           body(gen([choice(hello + [IM_END], "stop", IM_END, index=0),
                     choice(q3.ids("Bonjour à tous"), "length", index=1)])),
           "two choices in one generate_response")
    r.call("chat_request_with_model_mismatch_only", P, path,
           body(gen([choice(hello, "length")]), dict(chat, model="something-else")),
           "chat_request.model differs from the served name (top-level model is right)")

    # seeding (Llama-3 on the 0.33 plain llama server)
    lchat = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}],
             "chat_template_kwargs": L3_KW}
    lprompt = render_chat(L3_PLAIN, lchat)
    lids = l3.ids(" world, again") + [EOT]
    for name, pids, gpids, desc in [
            ("seed_llama_prompt_token_ids", lprompt, None, "seeded from prompt_token_ids"),
            ("seed_llama_none", None, None, "no prompt ids: unseeded"),
            ("seed_llama_from_generate_response", None, lprompt,
             "seeded from generate_response.prompt_token_ids")]:
        b = {"model": LLAMA, "generate_response": gen([choice(lids, "stop", EOT)],
                                                      **({"prompt_token_ids": gpids} if gpids else {})),
             "prompt_tokens": len(lprompt), "chat_request": lchat}
        if pids:
            b["prompt_token_ids"] = pids
        r.call(name, L, path, b, desc)
    b = {"model": LLAMA, "generate_response": gen([choice(l3.ids("Hi") + [EOM], "stop", None)]),
         "chat_request": lchat}
    r.call("llama_eom_secondary_eos", L, path, b, "<|eom_id|> (a non-primary generation-config EOS)")

    # parser server
    xchat = {"model": QWEN, "messages": [{"role": "user", "content": "Say hello."}]}
    xprompt = render_chat(Q3_PARSERS, xchat)
    think = q3.ids("<think>\nShort thought.\n</think>\n\nHello!") + [IM_END]
    r.call("parser_server_reasoning", X, path,
           {"model": QWEN, "generate_response": gen([choice(think, "stop", IM_END)]),
            "prompt_tokens": len(xprompt), "prompt_token_ids": xprompt, "chat_request": xchat},
           "qwen3 reasoning split on the parser server")
    r.call("parser_server_return_token_ids", X, path,
           {"model": QWEN, "generate_response": gen([choice(think, "stop", IM_END)],
                                                    prompt_token_ids=xprompt),
            "prompt_tokens": len(xprompt), "prompt_token_ids": xprompt,
            "chat_request": dict(xchat, return_token_ids=True, logprobs=True, top_logprobs=1)},
           "parser server, return_token_ids (no logprobs in the engine output)")
    r.call("parser_server_include_reasoning_false_hides_meta", X, path,
           {"model": QWEN, "generate_response": gen([choice(think, "stop", IM_END,
                                                            logprobs=lp_new(think, 2))],
                                                    prompt_token_ids=xprompt),
            "prompt_tokens": len(xprompt), "prompt_token_ids": xprompt,
            "chat_request": dict(xchat, include_reasoning=False, return_token_ids=True,
                                 logprobs=True, top_logprobs=1)},
           "include_reasoning false: reasoning null, logprobs and token_ids hidden")
    r.call("parser_server_logprobs", X, path,
           {"model": QWEN, "generate_response": gen([choice(think, "stop", IM_END,
                                                            logprobs=lp_new(think, 2))]),
            "prompt_tokens": len(xprompt), "prompt_token_ids": xprompt,
            "chat_request": dict(xchat, logprobs=True, top_logprobs=1)},
           "parser server logprobs (special tokens kept as text)")
    r.write()


# ---------------------------------------------------------- completions ------
def record_completions() -> None:
    r = Recorder("derender_completions", "Non-streaming POST /v1/completions/derender answers of "
                 "vLLM 0.33 (no parsers ever on this route).", SCRIPT)
    P = r.server("q3-plain", Q3_PLAIN, QWEN, ["--served-model-name tiny-qwen3"])
    L = r.server("l3-plain-256", L3_PLAIN, LLAMA, ["--served-model-name tiny-llama3",
                 "--max-model-len 256"])
    path = "/v1/completions/derender"
    creq = {"model": QWEN, "prompt": "The capital of France is"}
    [p0] = render_completion(Q3_PLAIN, creq)
    creq2 = {"model": QWEN, "prompt": ["The capital of France is", "Once upon a time"]}
    p0b, p1 = render_completion(Q3_PLAIN, creq2)
    paris = q3.ids(" Paris. It is a beautiful city.")

    def body(resps: list[dict[str, Any]], req: dict[str, Any] | None = creq, **kw: Any) -> dict[str, Any]:
        b: dict[str, Any] = {"model": QWEN, "generate_responses": resps}
        b.update(kw)
        if req is not None:
            b["completion_request"] = req
        return b

    r.call("single", P, path, body([gen([choice(paris, "length")], CRID)],
                                   prompt_tokens=[len(p0)], prompt_token_ids=[p0]),
           "one response, one choice")
    r.call("single_eos", P, path, body([gen([choice(paris + [ENDOFTEXT], "stop", ENDOFTEXT)], CRID)],
                                       prompt_tokens=[len(p0)]),
           "EOS last with stop_reason")
    r.call("full_engine_response", P, path,
           body([full_gen([choice(paris + [IM_END], "stop", IM_END)], CRID, len(p0))],
                prompt_tokens=[len(p0)]),
           "a complete engine response")
    r.call("two_prompts_flat_index", P, path,
           body([gen([choice(paris, "length")], CRID + "-0"),
                 gen([choice(q3.ids(" there was a fox."), "stop", None)], CRID + "-1")], creq2,
                prompt_tokens=[5, 10]),
           "two responses: indexes 0 and 1, usage.prompt_tokens = 15")
    r.call("n2_and_n1_flat_index", P, path,
           body([gen([choice(paris, "length", index=0), choice(q3.ids(" Lyon?"), "length", index=1)],
                     CRID + "-0"),
                 gen([choice(q3.ids(" a king"), "length", index=0)], CRID + "-1")],
                dict(creq2, n=2, temperature=1.0), prompt_tokens=[len(p0b), len(p1)],
                prompt_token_ids=[p0b, None]),
           "response 0 has 2 choices, response 1 one: flat indexes 0,1,2; a null prompt_token_ids entry")
    r.call("finish_reason_null_stays_null", P, path,
           body([gen([{"index": 0, "token_ids": paris, "finish_reason": None}], CRID)]),
           "finish_reason null passed through")
    r.call("finish_reason_omitted", P, path,
           body([gen([{"index": 0, "token_ids": paris}], CRID)]),
           "finish_reason omitted")
    r.call("no_completion_request", P, path,
           body([gen([choice(paris + [IM_END], "stop", IM_END)], CRID)], None),
           "no completion_request")
    r.call("stop_string_request", P, path,
           body([gen([choice(paris, "stop", None)], CRID)], dict(creq, stop=["beautiful"])),
           "stop string from the request")
    r.call("stop_string_include", P, path,
           body([gen([choice(paris, "stop", "beautiful")], CRID)],
                dict(creq, stop=["beautiful"], include_stop_str_in_output=True)),
           "stop string kept")
    r.call("stop_string_min_tokens", P, path,
           body([gen([choice(paris, "stop", None)], CRID)], dict(creq, stop=["."], min_tokens=4)),
           "min_tokens: the first '.' is inside the first 4 tokens")
    r.call("stop_token_ids", P, path,
           body([gen([choice(paris, "stop", None)], CRID)], dict(creq, stop_token_ids=[paris[-1]])),
           "last id in stop_token_ids")
    r.call("skip_special_false", P, path,
           body([gen([choice(paris + [IM_END], "length")], CRID)], dict(creq, skip_special_tokens=False)),
           "skip_special_tokens false with a length finish")
    lp = lp_new(paris, 3)
    for name, req, desc in [
            ("logprobs_1", dict(creq, logprobs=1), "logprobs 1: top_logprobs cut to 2 (logprobs+1)"),
            ("logprobs_0", dict(creq, logprobs=0), "logprobs 0: cut to 1"),
            ("logprobs_unset", creq, "logprobs unset: all candidates"),
            ("logprobs_minus1", dict(creq, logprobs=-1), "logprobs -1: all")]:
        r.call(name, P, path, body([gen([choice(paris, "length", logprobs=lp)], CRID)], req), desc)
    r.call("logprobs_legacy", P, path,
           body([gen([choice(paris, "length", logprobs=lp_legacy(paris, 3))], CRID)],
                dict(creq, logprobs=2)),
           "legacy 'token_id:N' logprobs")
    r.call("logprobs_empty_candidates", P, path,
           body([gen([choice(paris[:2], "length", logprobs={"content": [
               {"token_id": paris[0], "logprob": -9999.0, "rank": None, "top_logprobs": []},
               lp_new(paris[1:2], 2)["content"][0]]})], CRID)], dict(creq, logprobs=1)),
           "a position without candidates gives a null top_logprobs entry")
    emo = q3.ids(" 😀🫠 日本 𓀀")
    r.call("logprobs_emoji_text_offset", P, path,
           body([gen([choice(emo, "length", logprobs=lp_new(emo, 2))], CRID)], dict(creq, logprobs=1)),
           "text_offset over byte-fallback tokens")
    r.call("logprobs_two_responses", P, path,
           body([gen([choice(paris[:3], "length", logprobs=lp_new(paris[:3], 2))], CRID + "-0"),
                 gen([choice(paris[3:6], "length", logprobs=lp_new(paris[3:6], 2))], CRID + "-1")],
                dict(creq2, logprobs=1)),
           "text_offset restarts at 0 for each choice")
    r.call("return_token_ids", P, path,
           body([gen([choice(paris, "length")], CRID, prompt_token_ids=p0)],
                dict(creq, return_token_ids=True), prompt_token_ids=[p0]),
           "return_token_ids: token_ids and prompt_token_ids per choice")
    r.call("return_token_ids_from_generate", P, path,
           body([gen([choice(paris, "length")], CRID, prompt_token_ids=p0)],
                dict(creq, return_token_ids=True)),
           "return_token_ids, prompt ids only on the generate response")
    kv = {"do_remote_decode": False, "remote_block_ids": [1, 2]}
    r.call("kv_same", P, path,
           body([gen([choice(paris, "length")], CRID + "-0", kv_transfer_params=kv,
                     metrics={"arrival_time": 1.0}),
                 gen([choice(paris, "length")], CRID + "-1", kv_transfer_params=kv)], creq2),
           "same kv_transfer_params on both: kept; metrics dropped with two responses")
    r.call("kv_differ", P, path,
           body([gen([choice(paris, "length")], CRID + "-0", kv_transfer_params=kv),
                 gen([choice(paris, "length")], CRID + "-1",
                     kv_transfer_params={"do_remote_decode": True})], creq2),
           "kv_transfer_params differ: null")
    r.call("metrics_single", P, path,
           body([gen([choice(paris, "length")], CRID, metrics={"arrival_time": 1.5,
                                                              "num_generation_tokens": 7})]),
           "metrics kept with one response")
    lcreq = {"model": LLAMA, "prompt": "Hello"}
    [lp0] = render_completion(L3_PLAIN, lcreq)
    lids = l3.ids(" world and friends")
    r.call("llama_seeded", L, path,
           {"model": LLAMA, "generate_responses": [gen([choice(lids, "length")], CRID)],
            "prompt_token_ids": [lp0], "completion_request": lcreq}, "Llama-3 seeded")
    r.call("llama_unseeded", L, path,
           {"model": LLAMA, "generate_responses": [gen([choice(lids, "length")], CRID)],
            "completion_request": lcreq}, "Llama-3 unseeded")
    r.write()


# ---------------------------------------------------------------- errors -----
def record_errors() -> None:
    r = Recorder("derender_errors", "Error answers (status + exact body) of vLLM 0.33's derender "
                 "routes, docs/vllm-wire-spec.md §2.4 / 2.5 / 5.", SCRIPT)
    P = r.server("q3-plain", Q3_PLAIN, QWEN, ["--served-model-name tiny-qwen3"])
    X = r.server("q3-parsers", Q3_PARSERS, QWEN, ["--served-model-name tiny-qwen3",
                 "--tool-call-parser hermes", "--reasoning-parser qwen3", "--enable-auto-tool-choice"])
    L = r.server("l3-plain-256", L3_PLAIN, LLAMA, ["--served-model-name tiny-llama3",
                 "--max-model-len 256"])
    C, K = "/v1/chat/completions/derender", "/v1/completions/derender"
    chat = {"model": QWEN, "messages": [{"role": "user", "content": "Say hello."}]}
    hello = q3.ids("Hello there!")
    ok = gen([choice(hello, "length")])

    def cb(**kw: Any) -> dict[str, Any]:
        b = {"model": QWEN, "generate_response": ok, "chat_request": chat}
        b.update(kw)
        return {k: v for k, v in b.items() if v is not None}

    # common
    r.call("chat_unknown_model", P, C, cb(model="gpt-4"), "unknown model: 404")
    r.call("completion_unknown_model", P, K, {"model": "gpt-4", "generate_responses": [ok]},
           "unknown model: 404")
    r.call("chat_empty_model_ok", P, C, cb(model=""), "empty model string is accepted")
    r.call("chat_content_type", P, C, None, "text/plain content type",
           headers={"Content-Type": "text/plain"}, raw=b'{"generate_response": {}}')
    r.call("chat_not_json", P, C, None, "body is not JSON", raw=b'{"generate_response": ')
    r.call("chat_list_body", P, C, [cb()], "a JSON list body")
    r.call("chat_missing_generate_response", P, C, {"model": QWEN}, "generate_response missing")
    r.call("chat_generate_response_wrong_type", P, C, {"generate_response": [1, 2]},
           "generate_response is a list")
    r.call("chat_stream_missing_generate_chunk", P, C, {"stream": True, "model": QWEN},
           "streaming body without generate_chunk")
    r.call("chat_empty_token_ids", P, C, cb(generate_response=gen([choice([], "stop")])),
           "empty token_ids")
    r.call("chat_null_token_ids", P, C, cb(generate_response=gen([choice(None, "stop")])),
           "null token_ids")
    r.call("chat_second_choice_empty", P, C,
           cb(generate_response=gen([choice(hello, "length"), choice([], "stop", index=1)])),
           "choice 1 empty")
    r.call("chat_negative_prompt_token_id", P, C, cb(prompt_token_ids=[1, -2]),
           "negative id in prompt_token_ids")
    r.call("chat_negative_output_token_id", P, C, cb(generate_response=gen([choice([5, -1], "length")])),
           "negative id in token_ids")
    r.call("chat_output_mode_text", P, C,
           cb(generate_response=dict(ok, output_mode="text")), "generate_response output_mode text")
    r.call("chat_output_mode_derender", P, C,
           cb(generate_response=dict(ok, output_mode="derender")), "output_mode derender")
    r.call("chat_request_invalid", P, C, cb(chat_request={"model": QWEN}),
           "chat_request without messages")
    r.call("chat_request_bad_n_greedy", P, C,
           cb(chat_request=dict(chat, n=2, temperature=0)), "chat_request n=2 greedy (render-side check)")
    r.call("chat_stream_false_with_chunk", P, C,
           {"stream": False, "model": QWEN, "generate_chunk": ok},
           "stream false with a generate_chunk body")
    r.call("chat_stream_true_with_response", P, C,
           {"stream": True, "model": QWEN, "generate_response": ok},
           "stream true with generate_response")
    # bounds on the max-model-len 256 llama server
    lchat = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}]}
    big = list(range(1000, 1257))  # 257 ids > 256
    lok = gen([choice([1000, 1001], "length")])
    r.call("chat_token_ids_over_max_model_len", L, C,
           {"model": LLAMA, "generate_response": gen([choice(big, "length")]), "chat_request": lchat},
           "257 token_ids with max_model_len 256")
    r.call("chat_token_ids_at_max_model_len", L, C,
           {"model": LLAMA, "generate_response": gen([choice(big[:256], "length")])},
           "256 token_ids with max_model_len 256: accepted")
    r.call("chat_logprobs_over_max_model_len", L, C,
           {"model": LLAMA, "generate_response": gen([choice([1000], "length",
                                                             logprobs=lp_new(big, 1))])},
           "257 logprobs entries")
    r.call("chat_top_logprobs_over_max_logprobs", L, C,
           {"model": LLAMA, "generate_response": gen([choice([1000], "length", logprobs={"content": [
               {"token_id": 1000, "logprob": -1.0, "rank": 1,
                "top_logprobs": [{"token_id": 1000 + i, "logprob": -1.0 - i, "rank": i + 1}
                                 for i in range(21)]}]})])},
           "21 top_logprobs (default --max-logprobs 20)")
    r.call("chat_top_logprobs_at_max_logprobs", L, C,
           {"model": LLAMA, "generate_response": gen([choice([1000], "length", logprobs={"content": [
               {"token_id": 1000, "logprob": -1.0, "rank": 1,
                "top_logprobs": [{"token_id": 1000 + i, "logprob": -1.0 - i, "rank": i + 1}
                                 for i in range(20)]}]})])},
           "20 top_logprobs: accepted")
    r.call("chat_prompt_logprobs_over_max_model_len", L, C,
           {"model": LLAMA, "generate_response": dict(lok, prompt_logprobs=[None] * 257)},
           "257 prompt_logprobs")
    r.call("chat_prompt_token_ids_over_max_model_len", L, C,
           {"model": LLAMA, "generate_response": lok, "prompt_token_ids": big},
           "257 prompt_token_ids")
    r.call("chat_prompt_plus_output_over_max_model_len_ok", L, C,
           {"model": LLAMA, "generate_response": gen([choice(big[:200], "length")]),
            "prompt_token_ids": big[:200]},
           "prompt 200 + output 200 > 256 on the non-streaming path")
    r.call("completion_token_ids_over_max_model_len", L, K,
           {"model": LLAMA, "generate_responses": [gen([choice(big, "length")])]},
           "completions: 257 token_ids")
    r.call("completion_prompt_token_ids_over_max_model_len", L, K,
           {"model": LLAMA, "generate_responses": [lok], "prompt_token_ids": [big]},
           "completions: 257 prompt_token_ids")
    # choices count bound: too big to store, note only
    # parser server
    xchat = {"model": QWEN, "messages": [{"role": "user", "content": "Say hello."}]}
    r.call("parser_chat_request_missing", X, C, {"model": QWEN, "generate_response": ok},
           "parser configured, no chat_request")
    r.call("parser_stream_chat_request_missing", X, C,
           {"stream": True, "model": QWEN, "generate_chunk": ok, "prompt_token_ids": [1, 2]},
           "streaming, parser configured, no chat_request")
    r.call("parser_stream_prompt_token_ids_missing", X, C,
           {"stream": True, "model": QWEN, "generate_chunk": ok, "chat_request": xchat},
           "streaming, parser configured, no prompt_token_ids")
    r.call("parser_stream_stop", X, C,
           {"stream": True, "model": QWEN, "generate_chunk": ok, "prompt_token_ids": [1, 2],
            "chat_request": dict(xchat, stop=["x"])},
           "streaming, stop strings (checked before the chat_request/prompt checks?)")
    r.call("parser_stream_stop_and_missing_ids", X, C,
           {"stream": True, "model": QWEN, "generate_chunk": ok,
            "chat_request": dict(xchat, stop=["x"])},
           "streaming with stop and without prompt_token_ids: which check wins")
    # completions
    r.call("completion_empty_responses", P, K, {"model": QWEN, "generate_responses": []},
           "empty generate_responses")
    r.call("completion_prompt_tokens_len_mismatch", P, K,
           {"model": QWEN, "generate_responses": [ok], "prompt_tokens": [1, 2]},
           "prompt_tokens length mismatch")
    r.call("completion_prompt_token_ids_len_mismatch", P, K,
           {"model": QWEN, "generate_responses": [ok], "prompt_token_ids": [[1], [2]]},
           "prompt_token_ids length mismatch")
    r.call("completion_empty_token_ids", P, K,
           {"model": QWEN, "generate_responses": [gen([choice([], "stop")])]},
           "empty token_ids")
    r.call("completion_missing_responses", P, K, {"model": QWEN}, "generate_responses missing")
    r.call("completion_request_invalid", P, K,
           {"model": QWEN, "generate_responses": [ok], "completion_request": {"model": QWEN}},
           "completion_request without prompt")
    r.call("completion_request_echo_suffix", P, K,
           {"model": QWEN, "generate_responses": [ok],
            "completion_request": {"model": QWEN, "prompt": "x", "echo": True, "suffix": "y"}},
           "completion_request echo+suffix")
    # streaming
    st_chunk = gen([choice(hello, None)])
    r.call("stream_chat_stop", P, C,
           {"stream": True, "model": QWEN, "generate_chunk": st_chunk,
            "chat_request": dict(chat, stream=True, stop=["x"])}, "streaming chat with stop")
    r.call("stream_chat_stop_empty_list_ok", P, C,
           {"stream": True, "model": QWEN, "generate_chunk": st_chunk,
            "chat_request": dict(chat, stream=True, stop=[])}, "stop [] is accepted")
    r.call("stream_completion_stop", P, K,
           {"stream": True, "model": QWEN, "generate_chunk": st_chunk,
            "completion_request": {"model": QWEN, "prompt": "x", "stop": "x"}},
           "streaming completions with stop")
    two = gen([choice(hello, None), choice(hello, None, index=1)])
    r.call("stream_chat_two_choices", P, C,
           {"stream": True, "model": QWEN, "generate_chunk": two}, "two choices in one chunk")
    r.call("stream_completion_two_choices", P, K,
           {"stream": True, "model": QWEN, "generate_chunk": two}, "two choices in one chunk")
    r.call("stream_chat_unknown_model", P, C,
           {"stream": True, "model": "nope", "generate_chunk": st_chunk}, "unknown model")
    r.call("stream_chat_prompt_over_max", L, C,
           {"stream": True, "model": LLAMA, "generate_chunk": gen([choice([1000], None)]),
            "prompt_token_ids": big}, "prompt 257 > 256")
    r.call("stream_chat_prompt_plus_delta_over_max", L, C,
           {"stream": True, "model": LLAMA, "generate_chunk": gen([choice(big[:60], None)]),
            "prompt_token_ids": big[:200]}, "plain path: prompt 200 + delta 60 > 256")
    r.call("stream_completion_prompt_over_max", L, K,
           {"stream": True, "model": LLAMA, "generate_chunk": gen([choice([1000], None)]),
            "prompt_token_ids": big}, "completions: prompt 257 > 256")
    r.call("stream_completion_delta_over_max", L, K,
           {"stream": True, "model": LLAMA, "generate_chunk": gen([choice(big, None)])},
           "completions: delta of 257 ids")
    good_state = {"prev_tokens": ["a", "b"], "prefix_offset": 0, "read_offset": 2, "role_sent": True,
                  "logprob_context_token_ids": [], "logprob_text_offset": 0, "output_token_ids": [],
                  "output_chunk_lens": [], "tools_streamed": False, "last_tool_call_ids": []}
    for name, patch, desc in [
            ("state_negative_offset", {"prefix_offset": -1}, "negative prefix_offset"),
            ("state_negative_read_offset", {"read_offset": -3}, "negative read_offset"),
            ("state_prev_tokens_1025", {"prev_tokens": ["a"] * 1025, "read_offset": 1025},
             "prev_tokens 1025 entries"),
            ("state_prev_tokens_1024_ok", {"prev_tokens": ["a"] * 1024, "read_offset": 1024,
                                           "prefix_offset": 1019}, "prev_tokens 1024 entries: accepted"),
            ("state_chunk_lens_mismatch", {"output_token_ids": [1, 2, 3], "output_chunk_lens": [1]},
             "output_chunk_lens sum != len(output_token_ids)"),
            ("state_chunk_lens_zero", {"output_token_ids": [1], "output_chunk_lens": [0, 1]},
             "an output_chunk_lens entry 0"),
            ("state_logprob_ctx_5", {"logprob_context_token_ids": [1, 2, 3, 4, 5]},
             "logprob_context_token_ids of 5"),
            ("state_wrong_type", "garbage", "stream_state is a string"),
            ("state_unknown_key", {"bogus": 1}, "extra key in stream_state"),
            ("state_offsets_past_window", {"prefix_offset": 50, "read_offset": 90},
             "offsets beyond prev_tokens"),
            ("state_prev_tokens_not_strings", {"prev_tokens": [1, 2]}, "prev_tokens of ints"),
            ("state_prefix_gt_read", {"prefix_offset": 5, "read_offset": 1},
             "prefix_offset > read_offset: vLLM accepts it and loses the delta text"),
            ("state_empty_window_offsets", {"prev_tokens": [], "prefix_offset": 3, "read_offset": 7},
             "empty prev_tokens with offsets: accepted, delta text lost"),
            ("state_tools_streamed_not_bool", {"tools_streamed": "x"}, "tools_streamed a string"),
            ("state_logprob_ctx_out_of_vocab", {"logprob_context_token_ids": [999999999]},
             "out-of-vocab id in logprob_context_token_ids"),
    ]:
        state = patch if isinstance(patch, str) else dict(good_state, **patch)
        r.call("stream_chat_" + name, P, C,
               {"stream": True, "model": QWEN, "generate_chunk": st_chunk, "stream_state": state,
                "chat_request": dict(chat, stream=True)}, desc)
    for name, patch, desc in [
            ("state_offsets_past_window", {"prefix_offset": 50, "read_offset": 90},
             "offsets beyond prev_tokens"),
            ("state_negative_offset", {"prefix_offset": -1}, "negative prefix_offset")]:
        r.call("stream_completion_" + name, P, K,
               {"stream": True, "model": QWEN, "generate_chunk": st_chunk,
                "stream_state": dict(good_state, **patch)}, desc)
    xprompt = render_chat(Q3_PARSERS, xchat)
    for name, patch, desc in [
            ("state_output_ids_over_max", {"output_token_ids": list(range(1000, 1000 + 40960)),
                                           "output_chunk_lens": [40960]},
             "parser path: prompt + state output + delta > max_model_len"),
            ("state_bad_ids", {"output_token_ids": [999999999], "output_chunk_lens": [1]},
             "parser path: replay of an id far outside the vocab")]:
        r.call("parser_stream_" + name, X, C,
               {"stream": True, "model": QWEN, "generate_chunk": st_chunk,
                "stream_state": dict(good_state, **patch), "prompt_token_ids": xprompt,
                "chat_request": dict(xchat, stream=True)}, desc)
    r.call("parser_stream_huge_prompt_id", X, C,
           {"stream": True, "model": QWEN, "generate_chunk": st_chunk, "prompt_token_ids": [2 ** 40],
            "chat_request": dict(xchat, stream=True)},
           "parser path, prompt id 2**40: the replay raises -> 'invalid stream_state: derender failed'")
    r.call("plain_stream_huge_prompt_id", P, C,
           {"stream": True, "model": QWEN, "generate_chunk": st_chunk, "prompt_token_ids": [2 ** 40],
            "chat_request": dict(chat, stream=True)}, "plain path, prompt id 2**40: accepted")
    r.call("nonstream_huge_ids", P, C,
           cb(generate_response=gen([choice([2 ** 40, hello[0]], "length")]), prompt_token_ids=[2 ** 40]),
           "non-streaming, ids 2**40 in prompt and output: decoded as empty text")
    many = gen([choice([hello[0]], "length", index=i) for i in range(16385)])
    r.call("chat_choices_over_max_n_seqs", P, C, {"model": QWEN, "generate_response": many},
           "16385 choices > VLLM_MAX_N_SEQUENCES (16384)")
    r.call("completion_responses_over_max_n_seqs", P, K,
           {"model": QWEN, "generate_responses": [gen([choice([hello[0]], "length")])] * 16385},
           "16385 generate_responses > VLLM_MAX_N_SEQUENCES (16384)")
    # trim the huge recorded requests to keep the file small
    for c in r.cases:
        if c["name"] == "parser_stream_state_output_ids_over_max":
            c["request"]["stream_state"]["output_token_ids"] = "list(range(1000, 1000 + 40960))"
            c["request_note"] = ("stream_state.output_token_ids was [1000, 1001, ..., 41959] (40960 ids); "
                                 "stored as a Python expression")
        if c["name"] == "chat_choices_over_max_n_seqs":
            c["request"]["generate_response"]["choices"] = c["request"]["generate_response"]["choices"][:2]
            c["request_note"] = ("generate_response.choices had 16385 entries {index: i, finish_reason: "
                                 "'length', stop_reason: null, token_ids: [%d]} for i in 0..16384; the "
                                 "first 2 are stored" % hello[0])
        if c["name"] == "completion_responses_over_max_n_seqs":
            c["request"]["generate_responses"] = c["request"]["generate_responses"][:1]
            c["request_note"] = "generate_responses was this one response repeated 16385 times"
    r.write()



# ------------------------------------------------- Metaspace seeding (tiny-sp) ----
def record_seeding() -> None:
    """Seeding the detokenizer from the prompt on a SentencePiece/Metaspace tokenizer, whose
    decoder strips the first token's leading space (tiny-sp on 8132)."""
    from record_derender_stream import chunk as schunk
    r = Recorder("derender_seeding", "Derender on a Metaspace (SentencePiece, byte-fallback) tokenizer: "
                 "with and without prompt_token_ids seeding, streaming and not, logprob token strings. "
                 "Model tiny-sp = Mistral-7B's tokenizer.model.v1 via tests/metaspace.py "
                 "(tests/oracle/make_extra_models.py).", SCRIPT)
    S = r.server("sp-plain", 8132, "tiny-sp", ["--served-model-name tiny-sp"])
    sp = Tok("tiny-sp")
    C, K = "/v1/chat/completions/derender", "/v1/completions/derender"
    chat = {"model": "tiny-sp", "messages": [{"role": "user", "content": "Say hello."}]}
    prompt = render_chat(8132, chat)
    comp = {"model": "tiny-sp", "prompt": "The capital of France is"}
    [cprompt] = render_completion(8132, comp)
    text = "Hello world, 😀 café 日本"
    # tokenize as a continuation: the Metaspace pre-tokenizer prepends "▁" to the first word
    ids = sp.ids(text) + [2]
    cids = sp.ids("Paris, the 🗼 city")
    for name, pids, gp, desc in [("chat_seeded", prompt, None, "prompt_token_ids given"),
                                 ("chat_unseeded", None, None, "no prompt ids: the leading space is lost?"),
                                 ("chat_seeded_from_generate_response", None, prompt,
                                  "seeded from generate_response.prompt_token_ids")]:
        gr = gen([choice(ids, "stop", 2, logprobs=lp_new(ids, 2))], **({"prompt_token_ids": gp} if gp else {}))
        b = {"model": "tiny-sp", "generate_response": gr, "chat_request": dict(chat, logprobs=True, top_logprobs=1)}
        if pids:
            b["prompt_token_ids"] = pids
        r.call(name, S, C, b, desc, text=text)
    for name, pids, desc in [("completion_seeded", [cprompt], "seeded"), ("completion_unseeded", None, "unseeded")]:
        b = {"model": "tiny-sp", "generate_responses": [gen([choice(cids, "length", logprobs=lp_new(cids, 2))], CRID)],
             "completion_request": dict(comp, logprobs=1)}
        if pids:
            b["prompt_token_ids"] = pids
        r.call(name, S, K, b, desc, text="Paris, the 🗼 city")
    for name, pids in [("chat_stream_seeded", prompt), ("chat_stream_unseeded", None)]:
        bodies = []
        for i, t in enumerate(ids):
            last = i == len(ids) - 1
            b = {"stream": True, "model": "tiny-sp",
                 "generate_chunk": schunk([t], "stop" if last else None, 2 if last else None,
                                          logprobs={"content": [lp_new([t], 2)["content"][0]]}),
                 "stream_state": "ECHO", "chat_request": dict(chat, stream=True, logprobs=True, top_logprobs=1)}
            if pids and i == 0:
                b["prompt_token_ids"] = pids
            bodies.append(b)
        r.stream(name, S, C, bodies, "one token per call, " + ("seeded on the first call" if pids else "unseeded"),
                 text=text)
    for name, pids in [("completion_stream_seeded", cprompt), ("completion_stream_unseeded", None)]:
        bodies = []
        for i, t in enumerate(cids):
            b = {"stream": True, "model": "tiny-sp",
                 "generate_chunk": schunk([t], "length" if i == len(cids) - 1 else None, rid=CRID,
                                          logprobs={"content": [lp_new([t], 2)["content"][0]]}),
                 "stream_state": "ECHO", "completion_request": dict(comp, stream=True, logprobs=1)}
            if pids and i == 0:
                b["prompt_token_ids"] = pids
            bodies.append(b)
        r.stream(name, S, K, bodies, "completions one token per call, " + ("seeded" if pids else "unseeded"),
                 text="Paris, the 🗼 city")
    r.write()


if __name__ == "__main__":
    which = sys.argv[1:] or ["chat", "completions", "errors", "seeding"]
    if "chat" in which:
        record_chat()
    if "completions" in which:
        record_completions()
    if "errors" in which:
        record_errors()
    if "seeding" in which:
        record_seeding()
