"""`vllm serve`'s chat shapes from the one machine's events and results.

* streamed chunks are what vLLM dumps with `exclude_unset=True`: only the fields it sets (e.g.
  `"kv_transfer_params":null` on every token chunk, `stop_reason` only on the finishing one, a
  delta with only the keys the parser produced); the first chunk per choice carries
  `{"role":"assistant","content":""}`; the usage-only chunk is dumped without nulls;
* the non-streamed response is a full dump (every field, nulls included).

The plain path (no parser) sends every chunk (`{"content": text}`, possibly empty); the parser
path sends only deltas the parser produced, unless the chunk finishes the choice or carries
logprobs / token_ids the client asked for (vLLM's ChatStreamProcessor).
"""

from __future__ import annotations

from typing import Any

from core.derender.adapters.sse import DONE, data_event, openai_error_event
from core.derender.choice import ChoiceEvent, ChoiceResult
from core.derender.session import DerenderSession
from core.errors import RequestError


def request_role(request: Any) -> str:
    """The role of the answer: "assistant", or the last message's role without a generation prompt."""
    if request.add_generation_prompt:
        return "assistant"
    return str(request.messages[-1].get("role") or "assistant")


def echo_prefix(request: Any, role: str) -> str | None:
    """Chat `echo`: the last message's text, when it has the answer's role."""
    if not request.echo or not request.messages:
        return None
    last = request.messages[-1]
    if last.get("role") != role:
        return None
    content = last.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or None


def reasoning_fields(reasoning: str | None, reasoning_field: str) -> dict[str, Any]:
    if reasoning_field == "reasoning":
        return {"reasoning": reasoning}
    if reasoning_field == "reasoning_content":
        return {"reasoning_content": reasoning}
    return {"reasoning": reasoning, "reasoning_content": reasoning}


def tool_call_delta(call: dict[str, Any]) -> dict[str, Any]:
    """DeltaToolCall in declaration order (id, type, index, function), only the parts that are set."""
    out: dict[str, Any] = {}
    if call.get("id") is not None:
        out["id"] = call["id"]
    if call.get("type") is not None:
        out["type"] = call["type"]
    out["index"] = call["index"]
    function = call.get("function")
    if function is not None:
        fn: dict[str, Any] = {}
        if function.get("name") is not None:
            fn["name"] = function["name"]
        args = function.get("arguments")
        if args is not None and (args != "" or "name" not in fn):
            fn["arguments"] = args
        out["function"] = fn
    return out


def delta_message(event: ChoiceEvent, reasoning_field: str) -> dict[str, Any] | None:
    """A parsed event as vLLM's DeltaMessage with exclude_unset (None: the parser produced nothing)."""
    out: dict[str, Any] = {}
    if event.content is not None:
        out["content"] = event.content
    if event.reasoning is not None:
        if reasoning_field != "reasoning_content":
            out["reasoning"] = event.reasoning
        if reasoning_field != "reasoning":
            out["reasoning_content"] = event.reasoning
    if event.tool_calls:
        out["tool_calls"] = [tool_call_delta(c) for c in event.tool_calls]
    return out or None


def usage_full(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "prompt_tokens_details": None,
            "completion_tokens_details": None}


def usage_short(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens}


def usage_chunk(request_id: str, created: int, model: str, object_name: str, prompt_tokens: int,
                completion_tokens: int) -> dict[str, Any]:
    return {"id": request_id, "object": object_name, "created": created, "model": model, "choices": [],
            "usage": usage_short(prompt_tokens, completion_tokens)}


def stream_end(error: RequestError | None, usage_chunk_: dict[str, Any] | None) -> list[bytes]:
    """The last events of an OpenAI stream: the error event, or the usage chunk (when asked for), then [DONE]."""
    if error is not None:
        return [openai_error_event(error), DONE]
    return [DONE] if usage_chunk_ is None else [data_event(usage_chunk_), DONE]


def _continuous_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "completion_tokens_details": None}


class ChatStream:
    """A `chat.completion.chunk` stream (a `StreamWriter`) for one request's session."""

    def __init__(self, session: DerenderSession, request: Any, *, request_id: str, created: int, model: str,
                 prompt_token_ids: list[int], reasoning_field: str) -> None:
        self.session = session
        self.request_id, self.created, self.model = request_id, created, model
        self.prompt_tokens = len(prompt_token_ids)
        self.reasoning_field = reasoning_field
        self.role = request_role(request)
        self.echo = echo_prefix(request, self.role)
        self.prompt_token_ids = prompt_token_ids if request.return_token_ids else None
        options = request.stream_options
        self.include_usage = bool(options and options.include_usage)
        self.continuous = self.include_usage and bool(options and options.continuous_usage_stats)

    def _chunk(self, choice: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        chunk: dict[str, Any] = {"id": self.request_id, "object": "chat.completion.chunk", "created": self.created,
                                 "model": self.model, "choices": [choice]}
        if usage is not None:
            chunk["usage"] = usage
        return chunk

    def head(self) -> list[bytes]:
        """Per choice the role chunk, then (with `echo`) the echoed text (vLLM sets no kv_transfer_params on it)."""
        usage = _continuous_usage(self.prompt_tokens, 0) if self.continuous else None
        out = []
        for index in range(self.session.n):
            chunk = self._chunk({"index": index, "delta": {"role": self.role, "content": ""}, "logprobs": None,
                                 "finish_reason": None}, usage)
            chunk["prompt_token_ids"] = self.prompt_token_ids
            chunk["prompt_text"] = None
            out.append(data_event(chunk))
        if self.echo:
            out += [data_event(self._chunk({"index": i, "delta": {"content": self.echo}, "logprobs": None,
                                            "finish_reason": None}, usage)) for i in range(self.session.n)]
        return out

    def choice(self, event: ChoiceEvent) -> dict[str, Any] | None:
        """The chunk choice of an event, or None when there is nothing to send."""
        delta = delta_message(event, self.reasoning_field) if event.parsed else {"content": event.text}
        include_ids = self.session.spec.return_token_ids
        finish = event.finish_reason
        if delta is None:
            if finish is None and event.logprobs is None and not include_ids:
                return None
            delta = {}
        token_ids = (event.token_ids if event.token_ids is not None else []) if include_ids else None
        if finish is None:
            return {"index": event.index, "delta": delta, "logprobs": event.logprobs, "finish_reason": None,
                    "token_ids": token_ids}
        return {"index": event.index, "delta": delta, "logprobs": event.logprobs, "finish_reason": finish,
                "stop_reason": event.serve_stop_reason, "token_ids": token_ids, "weight_versions": None}

    def feed(self, prompt: int, batch: list[dict[str, Any]]) -> list[bytes]:
        out = []
        session = self.session
        for engine_event in batch:
            for event in session.feed(prompt, engine_event):
                choice = self.choice(event)
                if choice is not None:
                    usage = _continuous_usage(self.prompt_tokens, event.num_tokens) if self.continuous else None
                    chunk = self._chunk(choice, usage)
                    chunk["kv_transfer_params"] = None
                    out.append(data_event(chunk))
        return out

    def close(self, error: RequestError | None) -> list[bytes]:
        return stream_end(error, usage_chunk(self.request_id, self.created, self.model, "chat.completion.chunk",
                                             self.prompt_tokens, self.session.completion_tokens)
                          if self.include_usage and error is None else None)


def chat_message(role: str, result: ChoiceResult, content: str | None, reasoning_field: str) -> dict[str, Any]:
    """ChatMessage, full dump: tool_calls only when non-empty, reasoning last."""
    message: dict[str, Any] = {"role": role, "content": content, "refusal": None, "annotations": None,
                               "audio": None, "function_call": None}
    if result.tool_calls:
        message["tool_calls"] = result.tool_calls
    message.update(reasoning_fields(result.reasoning, reasoning_field))
    return message


def chat_response(session: DerenderSession, request: Any, *, request_id: str, created: int, model: str,
                  prompt_token_ids: list[int], reasoning_field: str,
                  prompt_logprobs: list[Any] | None = None) -> dict[str, Any]:
    """The non-streamed chat.completion, full dump."""
    role = request_role(request)
    echo = echo_prefix(request, role)
    include_ids = session.spec.return_token_ids
    choices = []
    for result in session.results():
        content = echo + (result.content or "") if echo else result.content
        choices.append({"index": result.index, "message": chat_message(role, result, content, reasoning_field),
                        "logprobs": result.logprobs, "finish_reason": result.finish_reason,
                        "stop_reason": result.serve_stop_reason,
                        "token_ids": result.token_ids if include_ids else None, "routed_experts": None,
                        "weight_versions": None})
    return {"id": request_id, "object": "chat.completion", "created": created, "model": model,
            "choices": choices, "service_tier": None, "system_fingerprint": None,
            "usage": usage_full(len(prompt_token_ids), session.completion_tokens), "prompt_logprobs": prompt_logprobs,
            "prompt_token_ids": prompt_token_ids if request.return_token_ids else None, "prompt_text": None,
            "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}
