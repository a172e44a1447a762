"""Shared checks of the frontier families' derender fixtures (parsers_<family>.json) over HTTP.

Non-streaming answers must equal vLLM's field for field (created and tool-call ids normalized).
Streams carry our own stream_state; every chunk keeps vLLM's shape (role first, finish_reason,
stop_reason, usage) and the deltas aggregate to the non-streaming message (docs/vllm-wire-spec.md §0.3: where vLLM's
stream and non-stream disagree, we follow the non-streaming answer).
"""

from __future__ import annotations

from tests.oracle_fixtures import scrub, stream_calls


async def check_nonstream(client, case) -> None:
    resp = await client.post(case["path"], json=case["request"])
    body = await resp.json()
    assert resp.status == case["status"], body
    assert scrub(body) == scrub(case["response"])


def aggregate(chunks) -> dict:
    agg = {"content": None, "reasoning": None, "calls": {}, "finish_reason": None, "stop_reason": None}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            for key in ("content", "reasoning"):
                if delta.get(key):
                    agg[key] = (agg[key] or "") + delta[key]
            for tc in delta.get("tool_calls") or []:
                call = agg["calls"].setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                call["id"] = call["id"] or scrub({"id": tc.get("id")})["id"]
                call["name"] += (tc.get("function") or {}).get("name") or ""
                call["arguments"] += (tc.get("function") or {}).get("arguments") or ""
            if choice.get("finish_reason"):
                agg["finish_reason"], agg["stop_reason"] = choice["finish_reason"], choice.get("stop_reason")
    return agg


async def check_stream(client, case, nonstream_case, *, compare_message: bool = True) -> None:
    state, chunks = None, []
    for request, status, expected in stream_calls(case):
        resp = await client.post(case["path"], json=dict(request, stream_state=state))
        body = await resp.json()
        assert resp.status == status == 200, body
        state = body["stream_state"]
        chunk = body["chunk"]
        assert [c["index"] for c in chunk["choices"]] == [c["index"] for c in expected["choices"]]
        for ours, theirs in zip(chunk["choices"], expected["choices"], strict=True):
            assert ours["finish_reason"] == theirs["finish_reason"]
            assert ours["stop_reason"] == theirs["stop_reason"]
            assert ours["delta"].get("role") == theirs["delta"].get("role")
        assert chunk["usage"] == expected["usage"]
        chunks.append(chunk)
    agg = aggregate(chunks)
    message = nonstream_case["response"]["choices"][0]
    assert agg["finish_reason"] == message["finish_reason"]
    if not compare_message:
        return
    want_calls = [{"id": scrub({"id": t["id"]})["id"], "name": t["function"]["name"],
                   "arguments": t["function"]["arguments"]} for t in message["message"].get("tool_calls") or []]
    assert [agg["calls"][i] for i in sorted(agg["calls"])] == want_calls
    content = message["message"]["content"]
    assert agg["content"] == (content or None)
    assert agg["reasoning"] == message["message"]["reasoning"]


def stream_chat(client, **request) -> tuple[str | None, str | None, list[dict], str | None]:
    """A streamed chat through the official client: (content, reasoning, calls, finish_reason)."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in client.chat.completions.create(stream=True, **request):
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            reasoning += (delta.model_extra or {}).get("reasoning") or ""
            for tc in delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = call["id"] or tc.id
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return content or None, reasoning or None, [calls[i] for i in sorted(calls)], finish
