"""QA fuzzing of the sans-IO core: whatever a client sends, core raises `RequestError` (a 400 with
vLLM's shape) and nothing else, and the streaming state survives any serialization point.

* `StateCodec.decode` on arbitrary values and on random re-encodings of real payloads;
* the raw streaming derender calls on validated bodies with hostile ids (past the vocab, past
  u32/int64, specials), odd finish/stop_reason combinations, logprobs, n>1 indexes;
* the non-streaming derender with the same chunks;
* the parser path with the state JSON round-tripped at every chunk equals one in-memory run.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.derender import DerenderSettings, derender_chat, derender_chat_stream, derender_completion_stream
from core.derender import derender_completion
from core.derender.state import StateCodec
from core.errors import RequestError
from core.protocol.derender import validate_derender_body
from core.render import RenderOptions

PROMPT = [151644, 872, 198, 45764, 23811, 13, 151645, 198, 151644, 77091, 198]
RID = "generate-tokens-chatcmpl-00112233aabbccdd"
HYP = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

IDS = st.one_of(st.integers(0, 151700), st.sampled_from([151643, 151645, 151657, 151658, 151667, 151668, 151669,
                                                          151935, 151936, 2**31, 2**32 - 1, 2**32, 2**63 - 1]))
FINISH = st.sampled_from([None, None, "stop", "length", "abort", "repetition"])
STOP_REASON = st.one_of(st.none(), st.sampled_from([151645, 151643, 0, 2**40, "xyz", "", "o"]))


@pytest.fixture(scope="module")
def plain(qwen3):
    return DerenderSettings(model=qwen3)


@pytest.fixture(scope="module")
def parsers(qwen3):
    return DerenderSettings.build(qwen3, reasoning_parser="qwen3", tool_call_parser="hermes",
                            enable_auto_tool_choice=True)


def choice_dict(index, ids, finish, stop_reason, with_logprobs):
    choice = {"index": index, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": ids}
    if with_logprobs and ids is not None:
        choice["logprobs"] = {"content": [{"token_id": t, "logprob": -1.0, "rank": 1,
                                           "top_logprobs": [{"token_id": t, "logprob": -1.0, "rank": 1}]}
                                          for t in ids]}
    return choice


def only_request_errors(fn, *args):
    """Call core; a client mistake must surface as RequestError (400), never anything else."""
    try:
        return fn(*args)
    except RequestError as exc:
        assert exc.status == 400, exc.message
        return None


# -- StateCodec --------------------------------------------------------------------------------

@HYP
@given(value=st.one_of(st.text(max_size=40), st.text(max_size=40).map(lambda t: "ds1." + t),
                       st.binary(max_size=60).map(lambda b: "ds1." + base64.urlsafe_b64encode(b).decode()),
                       st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                                    lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=2), i,
                                                                                         max_size=3),
                                    max_leaves=6).map(lambda v: "ds1." + base64.urlsafe_b64encode(
                                        json.dumps(v).encode()).decode().rstrip("=")),
                       st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2)),
       secret=st.sampled_from([None, "k"]))
def test_state_codec_raises_only_invalid_stream_state(value, secret):
    if secret and isinstance(value, str) and not value.isascii():
        return  # test_non_ascii_signature_is_invalid_stream_state (known bug)
    try:
        StateCodec(secret).decode(value, kind="chat", server="s", request="")
    except RequestError as exc:
        assert exc.status == 400 and exc.message.startswith("invalid stream_state: ")


def test_non_ascii_signature_is_invalid_stream_state():
    try:
        StateCodec("k").decode("ds1.e30.\x80", kind="chat", server="s", request="")
    except RequestError as exc:
        assert exc.message.startswith("invalid stream_state: ")
    else:
        raise AssertionError("accepted")


# -- streaming derender with hostile ids --------------------------------------------------------

CHAT_REQUESTS = st.sampled_from([None, {"messages": [{"role": "user", "content": "x"}]},
                                 {"messages": [{"role": "user", "content": "x"}], "stop": ["o", "\n\n"],
                                  "logprobs": True, "top_logprobs": 1, "return_token_ids": True},
                                 {"messages": [{"role": "user", "content": "x"}], "skip_special_tokens": False,
                                  "min_tokens": 2, "include_stop_str_in_output": True, "stop": [" "]}])
CMPL_REQUESTS = st.sampled_from([None, {"prompt": "x"}, {"prompt": "x", "stop": ["o"], "logprobs": 1, "echo": True},
                                 {"prompt": [1, 2], "skip_special_tokens": False, "return_token_ids": True}])


@HYP
@given(chunks=st.lists(st.tuples(st.one_of(st.none(), st.lists(IDS, max_size=6)), FINISH, STOP_REASON,
                                 st.booleans()), min_size=1, max_size=6),
       request=CHAT_REQUESTS, prompt=st.one_of(st.none(), st.lists(IDS, max_size=8)), chat=st.booleans())
def test_stream_derender_raises_only_request_errors(plain, chunks, request, prompt, chat):
    state = None
    key, fn = ("chat_request", derender_chat_stream) if chat else ("completion_request", derender_completion_stream)
    if not chat and request is not None:
        request = {"prompt": "x", **{k: v for k, v in request.items() if k not in ("messages", "top_logprobs",
                                                                                    "logprobs")}}
    for n, (ids, finish, stop_reason, with_lp) in enumerate(chunks):
        body = {"stream": True, "generate_chunk": {"request_id": RID, "choices": [
            choice_dict(0, ids, finish, stop_reason, with_lp)]}, "stream_state": state,
                "prompt_token_ids": prompt if n == 0 else None, key: request}
        req = validate_derender_body(json.loads(json.dumps(body)), chat=chat)
        out = only_request_errors(fn, plain, req)
        if out is None:
            return
        state = json.loads(json.dumps(out))["stream_state"]


@HYP
@given(ids=st.lists(IDS, max_size=10), finish=FINISH.filter(lambda f: f is not None), stop_reason=STOP_REASON,
       with_lp=st.booleans(), chat_request=CHAT_REQUESTS, cmpl_request=CMPL_REQUESTS,
       prompt=st.one_of(st.none(), st.lists(IDS, max_size=8)))
def test_nonstream_derender_raises_only_request_errors(plain, ids, finish, stop_reason, with_lp, chat_request,
                                                       cmpl_request, prompt):
    gen = {"request_id": RID, "choices": [choice_dict(0, ids, finish, stop_reason, with_lp)]}
    body = {"generate_response": gen, "prompt_token_ids": prompt, "chat_request": chat_request}
    only_request_errors(derender_chat, plain, validate_derender_body(body, chat=True))
    body = {"generate_responses": [gen], "prompt_token_ids": [prompt], "completion_request": cmpl_request}
    only_request_errors(derender_completion, plain, validate_derender_body(body, chat=False))


# -- the parser path: any chunking of adversarial markup gives the same aggregate ------------------

PIECES = st.lists(st.sampled_from(["<think>", "</think>", "\n", "hmm", " 世界", "<tool_call>", "</tool_call>",
                                   '{"name": "f", ', '"arguments": {"a": "', '1"}}', "🎉", " ok", "{", "}", "<tool"]),
                  min_size=1, max_size=14).map("".join)
TOOL_REQUEST = {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {
    "name": "f", "parameters": {"type": "object"}}}]}


def parsed_aggregate(settings_, pieces: list[list[int]]) -> dict:
    state = None
    agg: dict = {"content": "", "reasoning": "", "calls": {}, "finish": None}
    for n, piece in enumerate(pieces):
        last = n == len(pieces) - 1
        body = {"stream": True, "generate_chunk": {"request_id": RID, "choices": [
            choice_dict(0, piece, "stop" if last else None, 151645 if last else None, False)]},
                "stream_state": state, "prompt_token_ids": PROMPT if n == 0 else None, "chat_request": TOOL_REQUEST}
        res = json.loads(json.dumps(derender_chat_stream(settings_, validate_derender_body(body, chat=True))))
        for ch in res["chunk"]["choices"]:
            delta = ch["delta"]
            agg["content"] += delta.get("content") or ""
            agg["reasoning"] += delta.get("reasoning") or ""
            for call in delta.get("tool_calls") or ():
                slot = agg["calls"].setdefault(call["index"], {"name": "", "arguments": ""})
                fn = call.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            agg["finish"] = ch["finish_reason"] or agg["finish"]
        state = res["stream_state"]
    return agg


@HYP
@given(text=PIECES, cuts=st.lists(st.integers(0, 60), max_size=6))
def test_parser_stream_any_chunking_same_aggregate(parsers, qwen3, text, cuts):
    ids = qwen3.tokenizer.encode(text) + [151645]
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    chunked = parsed_aggregate(parsers, [ids[a:b] for a, b in zip(bounds, bounds[1:])])
    per_token = parsed_aggregate(parsers, [[i] for i in ids])
    whole = parsed_aggregate(parsers, [ids])
    assert chunked == per_token == whole
    resp = derender_chat(parsers, validate_derender_body({
        "generate_response": {"request_id": RID, "choices": [choice_dict(0, ids, "stop", 151645, False)]},
        "prompt_token_ids": PROMPT, "chat_request": TOOL_REQUEST}, chat=True))
    message = resp["choices"][0]["message"]
    if "<tool" in text and not message.get("tool_calls"):
        return  # a malformed call: the non-streamed answer no stream can give (tests/core/parsers STREAM_CANNOT_MATCH)
    assert (message["content"] or "") == whole["content"]
    assert (message.get("reasoning") or "") == whole["reasoning"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or []] == \
           [(c["name"], json.loads(c["arguments"])) for c in whole["calls"].values()]
    assert resp["choices"][0]["finish_reason"] == whole["finish"]
