"""The raw derender endpoints' response dicts, in vLLM 0.33's exact field sets and order
(docs/vllm-wire-spec.md §2.4, 2.5).

vLLM dumps its pydantic response models in full (`model_dump()`, unset values `null`); we build
the same dicts directly, so a streamed chunk costs a few dict literals and one orjson call.
"""

from __future__ import annotations

from typing import Any


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "prompt_tokens_details": None,
            "completion_tokens_details": None}


def stream_usage(chunk_usage: Any, prompt_tokens: int | None) -> dict[str, Any] | None:
    """Usage of a streamed chunk: only when the engine chunk has one (docs/vllm-wire-spec.md §5.2 step 5)."""
    if chunk_usage is None:
        return None
    if isinstance(chunk_usage, dict):
        engine_prompt, engine_completion = chunk_usage.get("prompt_tokens"), chunk_usage.get("completion_tokens")
    else:
        engine_prompt, engine_completion = chunk_usage.prompt_tokens, chunk_usage.completion_tokens
    pt = prompt_tokens if prompt_tokens is not None else (engine_prompt or 0)
    return usage(pt, engine_completion or 0)


def _put_reasoning(target: dict[str, Any], reasoning: str | None, field: str) -> None:
    if field == "reasoning_content":
        target["reasoning_content"] = reasoning
    elif field == "both":
        target["reasoning"] = reasoning
        target["reasoning_content"] = reasoning
    else:
        target["reasoning"] = reasoning


def message(content: str | None, reasoning: str | None, tool_calls: list[dict[str, Any]] | None,
            reasoning_field: str = "reasoning") -> dict[str, Any]:
    """ChatMessage: tool_calls only when non-empty, `reasoning` last (vLLM's serializer)."""
    out: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": None,
                           "audio": None, "function_call": None}
    if tool_calls:
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["function"]["name"],
                                           "arguments": c["function"]["arguments"]}}
                             for c in tool_calls]
    _put_reasoning(out, reasoning, reasoning_field)
    return out


def tool_call_delta(call: dict[str, Any]) -> dict[str, Any]:
    """DeltaToolCall, full dump: {id, type, index, function: {name, arguments} | null}."""
    function = call.get("function")
    return {"id": call.get("id"), "type": call.get("type"), "index": call["index"],
            "function": None if function is None else {"name": function.get("name"),
                                                       "arguments": function.get("arguments")}}


def delta(role: str | None, content: str | None, reasoning: str | None,
          tool_calls: list[dict[str, Any]] | None, reasoning_field: str = "reasoning") -> dict[str, Any]:
    """DeltaMessage: {role, content, reasoning, [tool_calls if non-empty]}."""
    out: dict[str, Any] = {"role": role, "content": content}
    _put_reasoning(out, reasoning, reasoning_field)
    if tool_calls:
        out["tool_calls"] = [tool_call_delta(c) for c in tool_calls]
    return out


def chat_event_choice(event: Any, reasoning_field: str, return_token_ids: bool) -> dict[str, Any]:
    """The chunk choice of a `ChoiceEvent` (the role inside the first delta, full dumps)."""
    # one unpacking instead of a field lookup per key: this runs once per streamed token
    index, first, text, reasoning, content, tool_calls, parsed, token_ids, logprobs, finish, stop, _, _ = event
    if not parsed:
        content = text or None
    if tool_calls or reasoning_field != "reasoning":
        delta_ = delta("assistant" if first else None, content, reasoning, tool_calls, reasoning_field)
    else:  # the common delta, built in one go
        delta_ = {"role": "assistant" if first else None, "content": content, "reasoning": reasoning}
    return {"index": index, "delta": delta_, "logprobs": logprobs, "finish_reason": finish, "stop_reason": stop,
            "token_ids": token_ids if return_token_ids else None, "weight_versions": None}


def completion_stream_choice(index: int, text: str, logprobs: dict[str, Any] | None,
                             finish_reason: str | None, stop_reason: int | str | None,
                             prompt_token_ids: list[int] | None, token_ids: list[int] | None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason,
            "stop_reason": stop_reason, "prompt_token_ids": prompt_token_ids, "token_ids": token_ids,
            "weight_versions": None}


def chat_chunk(id_: str, created: int, model: str, choices: list[dict[str, Any]], usage_: dict[str, Any] | None,
               prompt_token_ids: list[int] | None, metrics: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": id_, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices, "usage": usage_, "system_fingerprint": None,
            "prompt_token_ids": prompt_token_ids, "prompt_text": None, "metrics": metrics,
            "kv_transfer_params": None}


def completion_chunk(id_: str, created: int, model: str, choices: list[dict[str, Any]],
                     usage_: dict[str, Any] | None, metrics: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": id_, "object": "text_completion", "created": created, "model": model,
            "choices": choices, "usage": usage_, "system_fingerprint": None, "metrics": metrics,
            "kv_transfer_params": None}


def chat_choice(index: int, message_: dict[str, Any], logprobs: dict[str, Any] | None,
                finish_reason: str | None, stop_reason: int | str | None,
                token_ids: list[int] | None) -> dict[str, Any]:
    return {"index": index, "message": message_, "logprobs": logprobs, "finish_reason": finish_reason,
            "stop_reason": stop_reason, "token_ids": token_ids, "routed_experts": None,
            "weight_versions": None}


def chat_response(id_: str, created: int, model: str, choices: list[dict[str, Any]], usage_: dict[str, Any],
                  prompt_logprobs: Any, prompt_token_ids: list[int] | None,
                  kv_transfer_params: Any, metrics: Any) -> dict[str, Any]:
    return {"id": id_, "object": "chat.completion", "created": created, "model": model, "choices": choices,
            "service_tier": None, "system_fingerprint": None, "usage": usage_,
            "prompt_logprobs": prompt_logprobs, "prompt_token_ids": prompt_token_ids, "prompt_text": None,
            "kv_transfer_params": kv_transfer_params, "ec_transfer_params": None, "metrics": metrics}


def completion_choice(index: int, text: str, logprobs: dict[str, Any] | None, finish_reason: str | None,
                      stop_reason: int | str | None, token_ids: list[int] | None,
                      prompt_token_ids: list[int] | None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason,
            "stop_reason": stop_reason, "token_ids": token_ids, "prompt_logprobs": None,
            "prompt_token_ids": prompt_token_ids, "routed_experts": None, "weight_versions": None}


def completion_response(id_: str, created: int, model: str, choices: list[dict[str, Any]],
                        usage_: dict[str, Any], kv_transfer_params: Any, metrics: Any) -> dict[str, Any]:
    return {"id": id_, "object": "text_completion", "created": created, "model": model, "choices": choices,
            "service_tier": None, "system_fingerprint": None, "usage": usage_,
            "kv_transfer_params": kv_transfer_params, "ec_transfer_params": None, "metrics": metrics}
