"""Replays a parser golden (tests/core/parsers/golden_frontier/*.json: vLLM 0.33's answer for the
engine's token ids) through the chat derender route: once whole, then one token per call with the
stream_state carried by the client. Shared by the families' derender tests."""

from __future__ import annotations

from typing import Any

CHAT = "/v1/chat/completions/derender"
RID = "generate-tokens-chatcmpl-0011223344556677"


def _choice(ids: list[int], finish: str | None, eos: int) -> dict[str, Any]:
    return {"index": 0, "finish_reason": finish, "token_ids": ids,
            "stop_reason": eos if finish == "stop" and ids and ids[-1] == eos else None}


def id_shape(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Calls as the goldens hold them: {id (by shape), name, arguments}."""
    return [{"id": "chatcmpl-tool-<16hex>" if c["id"].startswith("chatcmpl-tool-") and len(c["id"]) == 30 else c["id"],
             "name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in calls or []]


async def derender_whole(client, prompt: list[int], request: dict[str, Any], record: dict[str, Any],
                         eos: int) -> tuple[dict[str, Any], str]:
    """The non-streaming answer: ({reasoning, content, tool_calls}, finish_reason)."""
    ids, finish = record["token_ids"], record["engine_finish_reason"]
    resp = await client.post(CHAT, json={"prompt_token_ids": prompt, "chat_request": request, "generate_response": {
        "request_id": RID, "choices": [_choice(ids, finish, eos)]}})
    body = await resp.json()
    assert resp.status == 200, body
    choice = body["choices"][0]
    message = choice["message"]
    return ({"reasoning": message.get("reasoning"), "content": message["content"],
             "tool_calls": id_shape(message.get("tool_calls"))}, choice["finish_reason"])


async def derender_per_token(client, prompt: list[int], request: dict[str, Any], record: dict[str, Any],
                             eos: int) -> tuple[dict[str, Any], str | None]:
    """The stream, one token per call, aggregated: ({reasoning, content, tool_calls}, finish_reason);
    empty reasoning / content are None."""
    ids, finish = record["token_ids"], record["engine_finish_reason"]
    state, agg, calls, last = None, {"reasoning": "", "content": ""}, {}, None
    for n, tid in enumerate(ids):
        end = n == len(ids) - 1
        chunk = {"request_id": RID, "usage": None, "output_mode": "tokens",
                 "choices": [_choice([tid], finish, eos) if end else
                             {"index": 0, "finish_reason": None, "stop_reason": None, "token_ids": [tid]}]}
        resp = await client.post(CHAT, json={"stream": True, "generate_chunk": chunk, "stream_state": state,
                                             "prompt_token_ids": prompt if n == 0 else None,
                                             "chat_request": request})
        data = await resp.json()
        assert resp.status == 200, data
        state = data["stream_state"]
        for c in data["chunk"]["choices"]:
            delta = c["delta"]
            agg["reasoning"] += delta.get("reasoning") or ""
            agg["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                slot["id"] = slot["id"] or tc.get("id")
                slot["name"] += (tc.get("function") or {}).get("name") or ""
                slot["arguments"] += (tc.get("function") or {}).get("arguments") or ""
            last = c.get("finish_reason") or last
    return ({"reasoning": agg["reasoning"] or None, "content": agg["content"] or None,
             "tool_calls": id_shape([{"id": c["id"], "function": c} for c in (calls[i] for i in sorted(calls))])},
            last)
