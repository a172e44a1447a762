"""Streaming derender (raw endpoint calls, in-process): chunking invariance, stop strings,
state size and validation, n>1, parser path. Real Qwen3 / Llama-3 tokenizers throughout."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.derender import DerenderSettings, derender_chat, derender_chat_stream, derender_completion_stream
from core.derender import derender_completion
from core.errors import RequestError
from core.protocol.derender import validate_derender_body
from core.render import RenderOptions

PROMPT = [151644, 872, 198, 45764, 23811, 13, 151645, 198, 151644, 77091, 198]
RID = "generate-tokens-chatcmpl-00112233aabbccdd"
HYP = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
TEXT = st.lists(st.sampled_from(list("ab cd,.!\n") + ["你好", "世界", "🎉", "é", "👍🏽", "STOP", "END"]),
                min_size=1, max_size=30).map("".join)


@pytest.fixture(scope="module")
def plain(qwen3):
    return DerenderSettings(model=qwen3)


@pytest.fixture(scope="module")
def parsers(qwen3):
    return DerenderSettings.build(qwen3, reasoning_parser="qwen3", tool_call_parser="hermes",
                            enable_auto_tool_choice=True)


def chunk_body(ids, finish=None, stop_reason=None, index=0, usage=None, logprobs=None):
    choice = {"index": index, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": ids}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"request_id": RID, "usage": usage, "output_mode": "tokens", "choices": [choice]}


def stream_chat(settings_, chunks, chat_request=None, prompt=PROMPT, path="chat"):
    """Drive the raw streaming call like a client: echo stream_state, JSON round trip each time."""
    state = None
    out = []
    for n, chunk in enumerate(chunks):
        body = {"stream": True, "model": settings_.model.name, "generate_chunk": chunk, "stream_state": state,
                "prompt_token_ids": prompt if n == 0 else None}
        if chat_request is not None:
            body["chat_request" if path == "chat" else "completion_request"] = chat_request
        req = validate_derender_body(json.loads(json.dumps(body)), chat=path == "chat")
        fn = derender_chat_stream if path == "chat" else derender_completion_stream
        res = json.loads(json.dumps(fn(settings_, req)))
        out.append(res["chunk"])
        state = res["stream_state"]
    return out, state


def split(ids, cuts):
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [ids[a:b] for a, b in zip(bounds, bounds[1:])]


def aggregate(chunks, key="content"):
    parts, finish, stop = [], None, None
    for c in chunks:
        for ch in c["choices"]:
            d = ch["delta"] if "delta" in ch else ch
            parts.append(d.get(key if "delta" in ch else "text") or "")
            finish = ch["finish_reason"] or finish
            stop = ch["stop_reason"] if ch["finish_reason"] else stop
    return "".join(parts), finish, stop


def nonstream_chat(settings_, ids, finish, stop_reason, chat_request=None, prompt=PROMPT):
    body = {"model": "tiny-qwen3", "prompt_token_ids": prompt,
            "generate_response": {"request_id": RID, "choices": [
                {"index": 0, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": ids}]}}
    if chat_request is not None:
        body["chat_request"] = chat_request
    return derender_chat(settings_, validate_derender_body(body, chat=True))["choices"][0]


@HYP
@given(text=TEXT, cuts=st.lists(st.integers(0, 100), max_size=6))
def test_stream_equals_non_stream_any_chunking(plain, qwen3, text, cuts):
    ids = qwen3.tokenizer.encode(text) + [151645]
    parts = split(ids, cuts)
    chunks = [chunk_body(p) for p in parts[:-1]] + [chunk_body(parts[-1], "stop", 151645)]
    streamed, finish, stop = aggregate(stream_chat(plain, chunks)[0])
    whole = nonstream_chat(plain, ids, "stop", 151645)
    assert streamed == whole["message"]["content"] == qwen3.tokenizer.decode(ids[:-1])
    assert (finish, stop) == (whole["finish_reason"], whole["stop_reason"]) == ("stop", 151645)


@HYP
@given(text=TEXT, cuts=st.lists(st.integers(0, 100), max_size=6), include=st.booleans(),
       stop=st.lists(st.sampled_from(["STOP", "END", "d,", "世界", "🎉!"]), min_size=1, max_size=2))
def test_stream_stop_strings_equal_non_stream_cut(plain, qwen3, text, cuts, include, stop):
    """Streamed stop strings cut where vLLM's non-streaming derender cuts (given finish "stop")."""
    ids = qwen3.tokenizer.encode(text) + [151645]
    request = {"messages": [{"role": "user", "content": "x"}], "stop": stop, "include_stop_str_in_output": include}
    parts = split(ids, cuts)
    chunks = [chunk_body(p) for p in parts[:-1]] + [chunk_body(parts[-1], "stop", 151645)]
    got = stream_chat(plain, chunks, request)[0]
    streamed, finish, stop_reason = aggregate(got)
    # vLLM's non-streaming derender cuts stop strings only when the engine reported no
    # stop_reason (an int reason means "stopped on that token"); streaming cuts as text arrives
    whole = nonstream_chat(plain, ids, "stop", None, request)
    assert streamed == whole["message"]["content"]
    matched = whole["stop_reason"] if isinstance(whole["stop_reason"], str) else 151645
    assert (finish, stop_reason) == ("stop", matched)
    # only one finish_reason is ever reported; after a cut the choice is silent
    finishes = [ch["finish_reason"] for c in got for ch in c["choices"] if ch["finish_reason"]]
    assert len(finishes) == 1


def test_stop_string_cut_mid_stream(plain, qwen3):
    ids = qwen3.tokenizer.encode("one two three four five")
    request = {"messages": [{"role": "user", "content": "x"}], "stop": ["three"]}
    got, state = stream_chat(plain, [chunk_body([i]) for i in ids], request)
    text, finish, stop = aggregate(got)
    assert (text, finish, stop) == ("one two ", "stop", "three")
    cut_at = next(n for n, c in enumerate(got) if c["choices"] and c["choices"][0]["finish_reason"])
    assert all(c["choices"] == [] for c in got[cut_at + 1:])
    assert len(state) < 300


def test_role_on_first_choice_only_and_usage_chunk(plain, qwen3):
    ids = qwen3.tokenizer.encode("Hello there")
    usage_first = {"request_id": RID, "usage": {"prompt_tokens": 11, "completion_tokens": 0, "total_tokens": 11},
                   "output_mode": "tokens", "choices": []}
    got, _ = stream_chat(plain, [usage_first] + [chunk_body([i]) for i in ids])
    assert got[0]["choices"] == [] and got[0]["usage"]["prompt_tokens"] == 11
    roles = [c["choices"][0]["delta"]["role"] for c in got[1:]]
    assert roles == ["assistant"] + [None] * (len(ids) - 1)


def test_state_stays_small_and_flat(plain, qwen3):
    ids = qwen3.tokenizer.encode("Streaming 你好 🎉 text with some words. " * 200)[:3000]
    request = {"messages": [{"role": "user", "content": "x"}], "stop": ["</answer>"], "logprobs": True}
    logprobs = [{"token_id": i, "logprob": -1.0, "top_logprobs": [{"token_id": i, "logprob": -1.0}]} for i in ids]
    sizes = []
    state = None
    for n, i in enumerate(ids):
        body = {"stream": True, "generate_chunk": chunk_body([i], logprobs=[logprobs[n]]), "stream_state": state,
                "prompt_token_ids": PROMPT, "chat_request": request}
        res = derender_chat_stream(plain, validate_derender_body(body, chat=True))
        state = res["stream_state"]
        sizes.append(len(state))
    assert max(sizes) <= 2048
    assert max(sizes[-100:]) <= max(sizes[:200]) + 16  # does not grow with the output


def _call(settings_, state, chunk=None, path="chat", **extra):
    body = {"stream": True, "generate_chunk": chunk or chunk_body([64]), "stream_state": state,
            "prompt_token_ids": PROMPT, **extra}
    fn = derender_chat_stream if path == "chat" else derender_completion_stream
    return fn(settings_, validate_derender_body(body, chat=path == "chat"))


@pytest.mark.parametrize("mutate,why", [
    (lambda s: s[:-7], "not decodable"),
    (lambda s: s[:4] + "!!!" + s[7:], "not decodable"),
    (lambda s: "xyz", "unknown format"),
    (lambda s: {"prev_tokens": []}, "expected the opaque string"),
    (lambda s: "ds1." + "e30", "malformed"),  # {}
])
def test_garbled_state_is_400(plain, mutate, why):
    state = _call(plain, None)["stream_state"]
    with pytest.raises(RequestError) as err:
        _call(plain, mutate(state))
    assert err.value.status == 400
    assert err.value.message.startswith("invalid stream_state: ") and why in err.value.message


def test_foreign_and_mismatched_states_are_400(plain, qwen3, llama3):
    state = _call(plain, None)["stream_state"]
    other_server = DerenderSettings(model=llama3)
    with pytest.raises(RequestError, match="another model or parser"):
        _call(other_server, state, chunk_body([64]))
    with pytest.raises(RequestError, match="completions|chat"):
        _call(plain, state, path="cmpl")
    other_request = dict(chunk_body([65]), request_id="generate-tokens-other")
    with pytest.raises(RequestError, match="another request"):
        _call(plain, state, other_request)
    with pytest.raises(RequestError, match="choice 0"):
        _call(plain, state, chunk_body([65], index=1))


def test_signed_state_detects_tampering(qwen3):
    signed = DerenderSettings(model=qwen3, stream_state_secret="s3cret")
    state = _call(signed, None)["stream_state"]
    assert state.count(".") == 2
    _call(signed, state)  # accepted as is
    body, sig = state.rsplit(".", 1)
    forged = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + sig
    with pytest.raises(RequestError, match="signature"):
        _call(signed, forged)
    with pytest.raises(RequestError, match="signature"):
        _call(signed, body)  # signature stripped
    other_key = DerenderSettings(model=qwen3, stream_state_secret="other")
    with pytest.raises(RequestError, match="signature"):
        _call(other_key, state)


def test_n2_one_state_per_index(plain, qwen3):
    a = qwen3.tokenizer.encode("first answer 你好")
    b = qwen3.tokenizer.encode("second one 🎉")
    states = {0: None, 1: None}
    texts = {0: "", 1: ""}
    order = [(0, i) for i in a] + [(1, i) for i in b]
    order = [x for pair in zip(order[:len(a)], order[len(a):]) for x in pair] + order[2 * min(len(a), len(b)):]
    for index, tid in order:
        body = {"stream": True, "generate_chunk": chunk_body([tid], index=index), "stream_state": states[index],
                "prompt_token_ids": PROMPT}
        res = derender_chat_stream(plain, validate_derender_body(body, chat=True))
        states[index] = res["stream_state"]
        texts[index] += res["chunk"]["choices"][0]["delta"]["content"] or ""
    assert texts == {0: "first answer 你好", 1: "second one 🎉"}


@HYP
@given(text=TEXT, cuts=st.lists(st.integers(0, 100), max_size=6))
def test_completion_stream_equals_non_stream(plain, qwen3, text, cuts):
    ids = qwen3.tokenizer.encode(text)
    lp = [{"token_id": i, "logprob": -0.5, "top_logprobs": [{"token_id": i, "logprob": -0.5}]} for i in ids]
    parts = split(list(range(len(ids))), cuts)
    chunks = [chunk_body([ids[j] for j in p], logprobs=[lp[j] for j in p]) for p in parts[:-1]]
    chunks.append(chunk_body([ids[j] for j in parts[-1]], "length", logprobs=[lp[j] for j in parts[-1]]))
    request = {"prompt": "x", "logprobs": 0}
    got, _ = stream_chat(plain, chunks, request, path="cmpl")
    whole = derender_completion(plain, validate_derender_body(
        {"generate_responses": [{"request_id": RID, "choices": [
            {"index": 0, "finish_reason": "length", "token_ids": ids, "logprobs": {"content": lp}}]}],
         "prompt_token_ids": [PROMPT], "completion_request": request}, chat=False))["choices"][0]
    assert "".join(c["choices"][0]["text"] for c in got) == whole["text"]
    offsets = [o for c in got for o in c["choices"][0]["logprobs"]["text_offset"]]
    assert offsets == whole["logprobs"]["text_offset"]


# -- parser path (hermes + qwen3) ------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "w",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}}}}}]
REPLY = ('<think>\nThe user wants weather. 天气 🌦\n</think>\n\nLet me check.\n<tool_call>\n'
         '{"name": "get_weather", "arguments": {"city": "Paris, 巴黎"}}\n</tool_call>')


@HYP
@given(cuts=st.lists(st.integers(0, 200), max_size=8))
def test_parser_stream_equals_non_stream(parsers, qwen3, cuts):
    request = {"messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS}
    ids = qwen3.tokenizer.encode(REPLY) + [151645]
    parts = split(ids, cuts)
    chunks = [chunk_body(p) for p in parts[:-1]] + [chunk_body(parts[-1], "stop", 151645)]
    got, state = stream_chat(parsers, chunks, request)
    content, finish, _ = aggregate(got, "content")
    reasoning = "".join(c["choices"][0]["delta"]["reasoning"] or "" for c in got if c["choices"])
    calls: dict[int, dict] = {}
    for c in got:
        for tc in c["choices"][0]["delta"].get("tool_calls", []):
            entry = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
            entry["id"] = entry["id"] or tc["id"]
            if tc["function"]:
                entry["name"] += tc["function"]["name"] or ""
                entry["arguments"] += tc["function"]["arguments"] or ""
    whole = nonstream_chat(parsers, ids, "stop", 151645, request)
    msg = whole["message"]
    assert reasoning == msg["reasoning"]
    assert (content or None) == msg["content"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        (t["function"]["name"], json.loads(t["function"]["arguments"])) for t in msg["tool_calls"]]
    assert all(c["id"].startswith("chatcmpl-tool-") for c in calls.values())
    assert finish == whole["finish_reason"] == "tool_calls"
    assert "<|im_end|>" not in (content or "")
    assert len(state) < 2048


def test_parser_stream_needs_prompt_ids_only_on_first_call(parsers, qwen3):
    request = {"messages": [{"role": "user", "content": "hi"}]}
    ids = qwen3.tokenizer.encode("<think>\nhm\n</think>\n\nHello")
    first = {"stream": True, "generate_chunk": chunk_body(ids[:2]), "chat_request": request}
    with pytest.raises(RequestError, match="prompt_token_ids is required"):
        derender_chat_stream(parsers, validate_derender_body(first, chat=True))
    first["prompt_token_ids"] = PROMPT
    res = derender_chat_stream(parsers, validate_derender_body(first, chat=True))
    later = {"stream": True, "generate_chunk": chunk_body(ids[2:]), "chat_request": request,
             "stream_state": res["stream_state"]}
    res2 = derender_chat_stream(parsers, validate_derender_body(later, chat=True))
    assert res2["chunk"]["choices"][0]["delta"]["content"] == "\n\nHello"
    assert res2["chunk"]["choices"][0]["delta"]["reasoning"] == "hm\n"


@pytest.mark.parametrize("field,keys", [("reasoning", ["reasoning"]), ("reasoning_content", ["reasoning_content"]),
                                        ("both", ["reasoning", "reasoning_content"])])
def test_reasoning_field_option(qwen3, field, keys):
    settings_ = DerenderSettings.build(qwen3, reasoning_parser="qwen3",
                                 reasoning_field=field)
    request = {"messages": [{"role": "user", "content": "hi"}]}
    ids = qwen3.tokenizer.encode("<think>\nhm\n</think>\n\nHi")
    got, _ = stream_chat(settings_, [chunk_body(ids[:4]), chunk_body(ids[4:], "length")], request)
    delta = got[0]["choices"][0]["delta"]
    assert [k for k in delta if k.startswith("reasoning")] == keys
    assert all(delta[k] for k in keys)
    msg = nonstream_chat(settings_, ids, "length", None, request)["message"]
    assert [k for k in msg if k.startswith("reasoning")] == keys and msg[keys[-1]] == "\nhm\n"


def test_in_process_engine_choices(plain, qwen3):
    """The front-door form: engine SSE choice dicts straight in, no serialization."""
    from core.derender.choice import ChoiceDerender
    from core.derender.spec import OutputSpec

    ids = qwen3.tokenizer.encode("in process 你好")
    d = ChoiceDerender.start(OutputSpec.for_raw_chat(plain, None, None), 0, PROMPT)
    out = [d.step_engine({"index": 0, "token_ids": [i], "finish_reason": None, "stop_reason": None,
                          "logprobs": {"content": [{"token_id": i, "logprob": -1.0, "rank": 1,
                                                    "top_logprobs": []}]}})
           for i in ids]
    assert "".join(e.content for e in out) == "in process 你好"
    assert "".join(e.logprobs["content"][0]["token"] for e in out) == "in process 你好"


def test_metaspace_model_end_to_end():
    """A SentencePiece model: the seeded stream keeps the first token's leading space in
    content and in logprob tokens, streamed or not (vLLM's seeding rule, docs/vllm-wire-spec.md §2.4 step 2)."""
    from core.model import ModelInfo
    from tests.metaspace import mistral_v1_tokenizer

    tok = mistral_v1_tokenizer()
    model = ModelInfo.build(tokenizer=tok, served_model_names=["mistral"], max_model_len=4096)
    settings_ = DerenderSettings(model=model)
    prompt = tok.encode("[INST] Hi [/INST]")
    ids = tok.encode("Hello 𝕏 world") + [2]
    lp = [{"token_id": i, "logprob": -1.0, "top_logprobs": []} for i in ids]
    request = {"messages": [{"role": "user", "content": "Hi"}], "logprobs": True}
    chunks = [dict(chunk_body([i], "stop" if n == len(ids) - 1 else None, 2 if n == len(ids) - 1 else None,
                              logprobs=[lp[n]]), request_id=RID) for n, i in enumerate(ids)]
    got, _ = stream_chat(settings_, chunks, request, prompt=prompt)
    body = {"prompt_token_ids": prompt, "chat_request": request, "generate_response": {"request_id": RID, "choices": [
        {"index": 0, "finish_reason": "stop", "stop_reason": 2, "token_ids": ids, "logprobs": {"content": lp}}]}}
    whole = derender_chat(settings_, validate_derender_body(body, chat=True))["choices"][0]
    streamed = "".join(c["choices"][0]["delta"]["content"] or "" for c in got)
    assert streamed == whole["message"]["content"] == " Hello 𝕏 world"
    tokens = [c["choices"][0]["logprobs"]["content"][0]["token"] for c in got]
    assert tokens == [e["token"] for e in whole["logprobs"]["content"]]
    assert tokens[0] == " Hello" and "𝕏" in tokens
