"""The reference engine against recorded answers of the real vLLM 0.32 tokens-only engine.

Every case of tests/fixtures/oracle/generate.json is replayed: same request, same headers. The
model weights differ (vLLM's are random, ours replay canned replies), so sampled ids differ; all
the rest must match: status, error bodies, key order of responses and events, one choice per
event, finish_reason / stop_reason / token counts where the request forces them (max_tokens,
a forcing logit_bias, min_tokens, stop_token_ids, ignore_eos), usage events, weight_versions,
aborts. Logprobs are checked in the 0.33 shape we emit (the 0.32 engine cut top_logprobs to k).
"""

from __future__ import annotations

import asyncio
import json

import orjson
import pytest

from core.reference_engine import ReplyBook
from proxy.reference_engine import create_reference_app
from tests.oracle_fixtures import load_fixture

CASES = load_fixture("generate")
# pydantic's error dump differs between vLLM (a dict repr per error) and us; the status, type
# and param must still match
PYDANTIC_SHAPED = {"error_empty_token_ids", "error_negative_token_id", "error_missing_sampling_params",
                   "error_not_json"}
# 0.33 knows output_mode "derender" (and rejects it on a tokens-only engine with the tokenizer
# message); the recorded 0.32 engine did not know the value at all
VERSION_DRIFT = {"error_output_mode_derender_stream"}
LONG_REPLY = " ".join(f"word{i}" for i in range(300))


def by_name(name: str) -> dict:
    return next(c for c in CASES if c["name"] == name)


@pytest.fixture
async def engine(aiohttp_client, qwen3):
    book = ReplyBook(qwen3, [(LONG_REPLY, None)])  # longer than any recorded max_tokens
    return await aiohttp_client(create_reference_app(qwen3, replies=book, token_delay_ms=1))


def events_of(raw: str) -> list:
    parts = raw.split("\n\n")
    assert parts[-1] == "" and parts[-2] == "data: [DONE]"
    return [orjson.loads(p[len("data: "):]) for p in parts[:-2]]


PER_EVENT_VALUES = (".finish_reason", ".stop_reason", ".weight_versions", ".usage", ".prompt_token_ids")


def assert_same_shape(ours, theirs, path="$"):
    """Same keys in the same order, same types; lists compared element-wise up to the shorter one.

    Fields whose value depends on which choice an event carries (interleaving differs) only need
    the same key; their values are checked separately."""
    if path.endswith(PER_EVENT_VALUES) and (ours is None or theirs is None):
        return
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), path
        assert list(ours) == list(theirs), f"{path}: {list(ours)} != {list(theirs)}"
        for key in theirs:
            assert_same_shape(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list), path
        for a, b in zip(ours, theirs):
            assert_same_shape(a, b, f"{path}[]")
    elif theirs is None:
        assert ours is None or path.endswith((".logprobs", ".top_logprobs")), f"{path}: {ours!r} is not null"
    else:
        assert type(ours) is type(theirs) or {type(ours), type(theirs)} <= {int, float}, path


def choice_summary(choice: dict) -> tuple:
    return choice["index"], choice["finish_reason"], choice["stop_reason"], len(choice["token_ids"])


async def send(engine, case):
    headers = dict(case.get("request_headers") or {})
    if case["name"] == "error_content_type":
        return await engine.post(case["path"], data=case.get("request_raw", "{}"), headers=headers)
    if case["name"] == "error_not_json":
        return await engine.post(case["path"], data=case.get("request_raw", "{bad"),
                                 headers={"Content-Type": "application/json"})
    if case["method"] == "GET":
        return await engine.get(case["path"])
    return await engine.post(case["path"], json=case["request"], headers=headers)


SIMPLE = [c["name"] for c in CASES if c["path"].startswith("/inference/v1/generate") and not c.get("abort")
          or c["path"] in ("/inference/v1/abort_requests", "/abort_requests", "/health")]


@pytest.mark.parametrize("name", SIMPLE)
async def test_matches_vllm_engine(engine, name):
    case = by_name(name)
    resp = await send(engine, case)
    assert resp.status == case["status"]
    raw = await resp.text()
    if case["status"] != 200:
        ours, theirs = json.loads(raw)["error"], case["response"]["error"]
        if name in VERSION_DRIFT:
            return
        assert (ours["type"], ours["param"], ours["code"]) == (theirs["type"], theirs["param"], theirs["code"])
        if name not in PYDANTIC_SHAPED:
            assert ours["message"] == theirs["message"]
        return
    if case["path"] != "/inference/v1/generate":
        assert raw == case.get("response_raw", "") == ""
        return
    assert resp.headers["Content-Type"] == case["response_headers"]["content-type"]
    if case.get("events") is None:
        ours, theirs = json.loads(raw), json.loads(case["response_raw"])
        assert_same_shape(ours, theirs)
        assert [choice_summary(c) for c in ours["choices"]] == [choice_summary(c) for c in theirs["choices"]]
        assert ours["usage"] == theirs["usage"]
        assert [c["weight_versions"] for c in ours["choices"]] == [c["weight_versions"] for c in theirs["choices"]]
        return
    ours, theirs = events_of(raw), events_of(case["response_raw"])
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert_same_shape(a, b)
        assert len(a["choices"]) == len(b["choices"]) <= 1
        assert a["usage"] == b["usage"] or (a["usage"] or {}).keys() == (b["usage"] or {}).keys()
    final = {c["choices"][0]["index"]: choice_summary(c["choices"][0])[:3] for c in theirs if c["choices"]
             and c["choices"][0]["finish_reason"]}
    assert {c["choices"][0]["index"]: choice_summary(c["choices"][0])[:3] for c in ours if c["choices"]
            and c["choices"][0]["finish_reason"]} == final
    if theirs[-1]["choices"] == []:
        assert ours[-1] == {**theirs[-1], "request_id": ours[-1]["request_id"]}


@pytest.mark.parametrize("name", [c["name"] for c in CASES if c.get("abort") and c["request"].get("stream")])
async def test_stream_abort_matches_vllm_engine(engine, name):
    case = by_name(name)
    abort = case["abort"]
    resp = await engine.post(case["path"], json=case["request"])
    for _ in range(abort["sent_after_events"]):
        await resp.content.readuntil(b"\n\n")
    aborted = await engine.post(abort["path"], json=abort["request"])
    assert aborted.status == abort["status"] and await aborted.text() == abort["response_raw"]
    ours = events_of("data: {}\n\n" * 0 + (await resp.text()))
    theirs = events_of(case["response_raw"])
    finish_theirs = [e["choices"][0]["finish_reason"] for e in theirs if e["choices"]][-1]
    finish_ours = [e["choices"][0]["finish_reason"] for e in ours if e["choices"]][-1]
    assert finish_ours == finish_theirs
    if finish_theirs == "abort":
        terminal = [e for e in ours if e["choices"]][-1]
        assert_same_shape(terminal, [e for e in theirs if e["choices"]][-1])
        assert terminal["choices"][0]["token_ids"] == []
    assert ("usage" in ours[-1] and ours[-1]["choices"] == []) == (theirs[-1]["choices"] == [])


async def test_non_streaming_abort_returns_tokens_so_far(engine):
    case = by_name("nonstream_aborted")
    task = asyncio.ensure_future(engine.post(case["path"], json=case["request"]))
    await asyncio.sleep(0.2)
    await engine.post(case["abort"]["path"], json=case["abort"]["request"])
    resp = await task
    ours = await resp.json()
    theirs = json.loads(case["response_raw"])
    assert_same_shape(ours, theirs)
    choice = ours["choices"][0]
    assert choice["finish_reason"] == "abort" and 0 < len(choice["token_ids"]) < 300
    assert choice["weight_versions"] == [{"version": "default", "start": 0, "end": len(choice["token_ids"])}]
