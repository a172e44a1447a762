"""The Responses API's shapes from the one machine's events and results (vLLM 0.33's rules).

* `ResponsesFrame`: what one request echoes in every response object (request fields, sampling
  values), dumped once per request;
* `output_items(...)`: a whole choice as output items, vLLM's `build_response_output_items`:
  a `reasoning` item, a `message` with one `output_text` part, one `function_call` (or
  `custom_tool_call`) per call; the last item `incomplete` on a length cut;
* `ResponsesStream`: the event stream (a `StreamWriter`), vLLM's SimpleStreamingEventProcessor:
  `response.created`, `response.in_progress`, then per item `output_item.added`,
  (`content_part.added`), deltas, dones, `output_item.done`; a new item opens whenever the kind of
  delta changes (tool call over reasoning over content) or a call with another index starts; then
  `response.completed` or `response.incomplete` carrying the streamed items. Every event has a
  `sequence_number` from 0; the framing is `event: TYPE` + `data: JSON`, with no `[DONE]`.

Logprobs (`include: ["message.output_text.logprobs"]`) follow vLLM: a non-streamed message
carries the logprobs of every generated position; a streamed `output_text.delta` carries those
of its chunk, so with reasoning or tool calls in the same output the streamed message holds only
the positions of chunks that produced content.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import BaseModel

from core.derender.adapters.sse import named_event
from core.derender.choice import ChoiceEvent, ChoiceResult
from core.derender.session import DerenderSession
from core.errors import RequestError


def random_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def _dump(value: Any) -> Any:
    if value is None or type(value) is str:  # most echoed fields (no failed attribute lookup for them)
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


def decode_custom_tool_input(arguments: str) -> str:
    """A custom tool's free-form input from the one-string function it was shown as."""
    try:
        decoded = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(decoded, dict) and isinstance(decoded.get("input"), str):
        return decoded["input"]
    return arguments


def item_status(finish_reason: str | None) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


def response_logprobs(logprobs: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """Chat-shaped logprobs as an output_text part's (vLLM's field order)."""
    if logprobs is None or logprobs.get("content") is None:
        return None
    return [{"token": e["token"], "bytes": e["bytes"], "logprob": e["logprob"],
             "top_logprobs": [{"token": t["token"], "bytes": t["bytes"], "logprob": t["logprob"]}
                              for t in e["top_logprobs"]]} for e in logprobs["content"]]


def _delta_logprobs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An output_text.delta's logprobs: no bytes."""
    return [{"token": e["token"], "logprob": e["logprob"],
             "top_logprobs": [{"token": t["token"], "logprob": t["logprob"]} for t in e["top_logprobs"]]}
            for e in entries]


class ReasoningCounter:
    """vLLM's count_reasoning_tokens for think-tag parsers: tokens strictly inside start/end
    markers (nesting counted, a stray end ignored); 0 for parsers that cannot tell."""

    __slots__ = ("start", "end", "depth", "count")

    def __init__(self, parser: Any) -> None:
        reasoning = getattr(parser, "reasoning", None)
        self.start = getattr(reasoning, "start_id", None)
        self.end = getattr(reasoning, "end_id", None)
        self.depth = 0
        self.count = 0

    def feed(self, token_ids: Sequence[int] | None) -> None:
        if self.start is None or self.end is None or not token_ids:
            return
        for token_id in token_ids:
            if token_id == self.start:
                self.depth += 1
            elif token_id == self.end:
                self.depth = max(0, self.depth - 1)
            elif self.depth:
                self.count += 1


class ResponsesFrame:
    """The parts of a response object that come from the request (dumped once)."""

    def __init__(self, request: Any, sampling: dict[str, Any], *, model: str, created_at: int,
                 tool_names: Any) -> None:
        self.id = request.request_id
        self.tool_names = tool_names
        self.include_logprobs = bool(request.include_output_logprobs)
        self.created_at = created_at
        self.before_output = {"id": self.id, "created_at": created_at}
        self.echo_head = {"instructions": request.instructions, "metadata": request.metadata, "model": model,
                          "object": "response"}
        self.echo_tail = {
            "parallel_tool_calls": request.parallel_tool_calls if request.parallel_tool_calls is not None else True,
            "temperature": sampling.get("temperature", 1.0), "tool_choice": _dump(request.tool_choice),
            "tools": _dump(request.tools), "top_p": sampling.get("top_p", 1.0), "background": bool(request.background),
            "max_output_tokens": sampling.get("max_tokens"), "max_tool_calls": request.max_tool_calls,
            "previous_response_id": request.previous_response_id, "prompt": _dump(request.prompt),
            "prompt_cache_options": _dump(request.prompt_cache_options),
            "prompt_cache_key": request.prompt_cache_key, "prompt_cache_retention": request.prompt_cache_retention,
            "reasoning": _dump(request.reasoning), "safety_identifier": request.safety_identifier,
            "service_tier": request.service_tier}
        self.echo_end = {"text": _dump(request.text), "top_logprobs": sampling.get("logprobs"),
                         "truncation": request.truncation or "disabled"}
        self.user = request.user
        self.penalties = {"presence_penalty": sampling.get("presence_penalty", 0.0),
                          "frequency_penalty": sampling.get("frequency_penalty", 0.0)}

    def response(self, output: list[dict[str, Any]], status: str, usage: dict[str, Any] | None,
                 error: dict[str, Any] | None = None) -> dict[str, Any]:
        """The response object (`ResponsesResponse.from_request`), full dump."""
        out: dict[str, Any] = {**self.before_output,
                               "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
                               **self.echo_head, "output": output, **self.echo_tail, "status": status,
                               **self.echo_end, "usage": usage, "user": self.user, **self.penalties,
                               "kv_transfer_params": None, "ec_transfer_params": None, "input_messages": None,
                               "output_messages": None}
        if error is not None:  # OpenAI's failed response says why (vLLM has no field for it)
            out["error"] = error
        return out

    def call_item(self, call_id: str, flat_name: str, arguments: str, status: str,
                  item_id: str | None = None) -> dict[str, Any]:
        namespace, name = self.tool_names.resolve(flat_name)
        if name in self.tool_names.custom:
            return {"id": item_id or random_id("ctc"), "call_id": call_id, "type": "custom_tool_call",
                    "name": name, "input": decode_custom_tool_input(arguments)}
        return {"arguments": arguments, "call_id": call_id, "name": name, "type": "function_call",
                "id": item_id or random_id("fc"), "async": None, "caller": None, "namespace": namespace,
                "status": status}


def usage(prompt_tokens: int, output_tokens: int, reasoning_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    return {"input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0,
                                     "input_tokens_per_turn": [], "cached_tokens_per_turn": []},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens, "tool_output_tokens": 0,
                                      "output_tokens_per_turn": [], "tool_output_tokens_per_turn": []},
            "total_tokens": prompt_tokens + output_tokens}


def _message(item_id: str, text: str, logprobs: list[dict[str, Any]] | None, status: str) -> dict[str, Any]:
    part = {"annotations": [], "text": text, "type": "output_text", "logprobs": logprobs}
    return {"id": item_id, "content": [part] if text else [], "role": "assistant", "status": status,
            "type": "message", "phase": None}


def output_items(frame: ResponsesFrame, result: ChoiceResult, parsed: bool) -> list[dict[str, Any]]:
    """A whole choice's output items (vLLM's build_response_output_items; without a parser, one
    message whatever its text)."""
    last = item_status(result.finish_reason)
    logprobs = response_logprobs(result.logprobs) if frame.include_logprobs else None
    if not parsed:
        return [_message(random_id("msg"), result.text, logprobs, last)]
    items: list[dict[str, Any]] = []
    if result.reasoning:
        items.append({"id": random_id("rs"), "summary": [], "type": "reasoning",
                      "content": [{"text": result.reasoning, "type": "reasoning_text"}], "encrypted_content": None,
                      "status": None})
    calls = result.tool_calls
    if result.content:
        items.append(_message(random_id("msg"), result.content, logprobs, "completed" if calls else last))
    for n, call in enumerate(calls):
        fn = call["function"]
        items.append(frame.call_item(call["id"], fn["name"], fn["arguments"],
                                     last if n == len(calls) - 1 else "completed"))
    return items


def non_streamed(frame: ResponsesFrame, session: DerenderSession, counter: ReasoningCounter,
                 cached_tokens: int = 0) -> dict[str, Any]:
    """The non-streamed response object."""
    result = session.results()[0]
    counter.feed(result.token_ids)
    prompt_tokens = len(session.prompts[0])
    return frame.response(output_items(frame, result, session.spec.parser is not None),
                          item_status(result.finish_reason),
                          usage(prompt_tokens, session.completion_tokens, counter.count, cached_tokens))


# -- the event stream -------------------------------------------------------------------------

NONE, REASONING, CONTENT, TOOL_CALL = "none", "reasoning", "content", "tool_call"
_NO_LOGPROBS: list[dict[str, Any]] = []  # shared, never mutated
_DELTA_KINDS = {REASONING: "response.reasoning_text.delta", CONTENT: "response.output_text.delta",
                TOOL_CALL: "response.function_call_arguments.delta"}


def delta_framing(state: str, item_id: str, output_index: int) -> tuple[bytes, bytes, bytes]:
    """The fixed bytes around a delta event's text and sequence number for one open item: the
    event is `head + json(delta) + middle + str(sequence) + tail`, byte for byte what
    `named_event` writes for its payload (the same keys in the same order), without building and
    dumping a dict per token. (An output_text.delta with logprobs is not framed this way.)"""
    kind = _DELTA_KINDS[state]
    head = b"event: " + kind.encode() + b"\ndata: {" + (b"" if state == TOOL_CALL else b'"content_index":0,') + b'"delta":'
    middle = (b',"item_id":' + orjson.dumps(item_id) + (b',"logprobs":[]' if state == CONTENT else b"")
              + b',"output_index":' + str(output_index).encode() + b',"sequence_number":')
    return head, middle, b',"type":"' + kind.encode() + b'"}\n\n'


class ResponsesStream:
    """Responses streaming events (a `StreamWriter`) for one request's session (n = 1)."""

    def __init__(self, session: DerenderSession, frame: ResponsesFrame, counter: ReasoningCounter) -> None:
        self.session = session
        self.frame = frame
        self.counter = counter
        self.sequence = 0
        self.items: list[dict[str, Any]] = []  # closed output items, for the final response
        self.state = NONE
        self.output_index = 0
        self.item_id = ""
        self.text: list[str] = []
        self.logprobs: list[dict[str, Any]] = []
        self.call: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.hide_logprobs = not frame.include_logprobs
        self.final: dict[str, Any] | None = None  # the response the stream ended with
        self.framing = (b"", b"", b"")  # the open item's delta_framing

    def _delta_event(self, text: str) -> bytes:
        head, middle, tail = self.framing
        self.sequence += 1
        return head + orjson.dumps(text) + middle + str(self.sequence - 1).encode() + tail

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        payload["sequence_number"] = self.sequence
        payload["type"] = kind
        self.sequence += 1
        return named_event(kind, payload)

    def head(self) -> list[bytes]:
        # both events carry the same response object: dumped once (it is most of the head's cost,
        # and the head is on the way to the engine request)
        start = orjson.dumps(self.frame.response([], "in_progress", None))
        events = []
        for kind in ("response.created", "response.in_progress"):
            events.append(b"event: " + kind.encode() + b'\ndata: {"response":' + start + b',"sequence_number":'
                          + str(self.sequence).encode() + b',"type":"' + kind.encode() + b'"}\n\n')
            self.sequence += 1
        return events

    # -- items ------------------------------------------------------------------------------

    def _open(self, state: str, call: dict[str, Any] | None = None) -> list[bytes]:
        self.state = state
        self.text = []
        self.logprobs = []
        index = self.output_index
        if state == REASONING:
            self.item_id = random_id("rs")
            self.framing = delta_framing(state, self.item_id, index)
            return [self._event("response.output_item.added", {"item": {
                        "id": self.item_id, "summary": [], "type": "reasoning", "content": None,
                        "encrypted_content": None, "status": "in_progress"}, "output_index": index}),
                    self._event("response.content_part.added", {
                        "content_index": 0, "item_id": self.item_id, "output_index": index,
                        "part": {"text": "", "type": "reasoning_text"}})]
        if state == CONTENT:
            self.item_id = random_id("msg")
            self.framing = delta_framing(state, self.item_id, index)
            return [self._event("response.output_item.added", {"item": _message(self.item_id, "", None, "in_progress"),
                                                               "output_index": index}),
                    self._event("response.content_part.added", {
                        "content_index": 0, "item_id": self.item_id, "output_index": index,
                        "part": {"annotations": [], "text": "", "type": "output_text", "logprobs": []}})]
        assert call is not None
        function = call.get("function") or {}
        item = self.frame.call_item(call.get("id") or random_id("chatcmpl-tool"), function.get("name") or "", "",
                                    "in_progress")
        self.item_id = item["id"]
        self.framing = delta_framing(state, self.item_id, index)
        self.call = {"index": call.get("index"), "item": item}
        if item["type"] == "custom_tool_call":
            item["input"] = ""
        return [self._event("response.output_item.added", {"item": item, "output_index": index})]

    def _close(self, status: str = "completed") -> list[bytes]:
        state, index, item_id = self.state, self.output_index, self.item_id
        if state == NONE:
            return []
        text = "".join(self.text)
        if state == REASONING:
            part = {"text": text, "type": "reasoning_text"}
            item = {"id": item_id, "summary": [], "type": "reasoning", "content": [part], "encrypted_content": None,
                    "status": status}
            events = [self._event("response.reasoning_text.done", {"content_index": 0, "item_id": item_id,
                                                                   "output_index": index, "text": text}),
                      self._event("response.content_part.done", {"content_index": 0, "item_id": item_id,
                                                                 "output_index": index, "part": part})]
        elif state == CONTENT:
            item = _message(item_id, text, self.logprobs or None, status)
            part = {"annotations": [], "text": text, "type": "output_text", "logprobs": self.logprobs or None}
            events = [self._event("response.output_text.done", {"content_index": 0, "item_id": item_id,
                                                                 "logprobs": [], "output_index": index, "text": text}),
                      self._event("response.content_part.done", {"content_index": 0, "item_id": item_id,
                                                                 "output_index": index, "part": part})]
        else:
            opened = self.call["item"]
            item = self.frame.call_item(opened["call_id"], opened["name"] if opened["type"] == "custom_tool_call"
                                        else self._flat_name(opened), text, status, item_id)
            if item["type"] == "custom_tool_call":
                events = [self._event("response.custom_tool_call_input.done", {
                    "input": item["input"], "item_id": item_id, "output_index": index})]
            else:
                events = [self._event("response.function_call_arguments.done", {
                    "arguments": text, "item_id": item_id, "output_index": index, "name": item["name"]})]
        events.append(self._event("response.output_item.done", {"item": item, "output_index": index}))
        self.items.append(item)
        self.output_index += 1
        self.state = NONE
        return events

    def _flat_name(self, item: dict[str, Any]) -> str:
        namespace = item.get("namespace")
        return f"{namespace}__{item['name']}" if namespace else item["name"]

    # -- deltas -----------------------------------------------------------------------------

    def _pieces(self, event: ChoiceEvent) -> list[tuple[str, Any]]:
        """An event as atomic deltas, vLLM's split_delta order: reasoning, content, calls by index."""
        if not event.parsed:
            return [(CONTENT, event.text)] if event.text else []
        out: list[tuple[str, Any]] = []
        if event.reasoning is not None:
            out.append((REASONING, event.reasoning))
        if event.content:
            out.append((CONTENT, event.content))
        groups: dict[int, list[dict[str, Any]]] = {}
        for call in event.tool_calls:
            groups.setdefault(call["index"], []).append(call)
        out += [(TOOL_CALL, calls) for calls in groups.values()]
        return out

    def _delta(self, kind: str, value: Any, logprobs: list[dict[str, Any]], out: list[bytes]) -> None:
        if kind == TOOL_CALL:
            first = value[0]
            if self.state != TOOL_CALL or self.call.get("index") != first.get("index"):
                out += self._close()
                out += self._open(TOOL_CALL, first)
            args = "".join((c.get("function") or {}).get("arguments") or "" for c in value)
            if args:
                self.text.append(args)
                if self.call["item"]["type"] == "custom_tool_call":
                    out += self._custom_delta()
                else:
                    out.append(self._delta_event(args))
            return
        if self.state != kind:
            out += self._close()
            out += self._open(kind)
        self.text.append(value)
        if not logprobs:  # (reasoning never has any)
            out.append(self._delta_event(value))
        else:
            self.logprobs += logprobs
            out.append(self._event("response.output_text.delta", {
                "content_index": 0, "delta": value, "item_id": self.item_id,
                "logprobs": _delta_logprobs(logprobs), "output_index": self.output_index}))

    def _custom_delta(self) -> list[bytes]:
        payload = decode_custom_tool_input("".join(self.text))
        streamed = self.call.get("payload", "")
        if payload == streamed:
            return []
        self.call["payload"] = payload
        delta = payload[len(streamed):] if payload.startswith(streamed) else payload
        return [self._event("response.custom_tool_call_input.delta", {
            "delta": delta, "item_id": self.item_id, "output_index": self.output_index})]

    def feed(self, prompt: int, batch: list[dict[str, Any]]) -> list[bytes]:
        out: list[bytes] = []
        counter = self.counter
        for engine_event in batch:
            for event in self.session.feed(prompt, engine_event):
                if counter.start is not None:
                    counter.feed(event.token_ids)
                logprobs = [] if self.hide_logprobs else (response_logprobs(event.logprobs) or [])
                if event.tool_calls or not event.parsed or (event.reasoning is not None and event.content):
                    for kind, value in self._pieces(event):
                        self._delta(kind, value, logprobs if kind == CONTENT else _NO_LOGPROBS, out)
                elif event.reasoning is not None:  # the common events: one kind of text
                    self._delta(REASONING, event.reasoning, _NO_LOGPROBS, out)
                elif event.content:
                    self._delta(CONTENT, event.content, logprobs, out)
                if event.finish_reason is not None:
                    self.finish_reason = event.finish_reason
        return out

    def close(self, error: RequestError | None) -> list[bytes]:
        frame = self.frame
        if error is not None:
            out = self._close("incomplete")
            out.append(self._event("error", {"code": str(error.status), "message": error.message,
                                             "param": error.param}))
            failed = self.final = frame.response(self.items, "failed", None,
                                                 {"code": "server_error", "message": error.message})
            out.append(self._event("response.failed", {"response": failed}))
            return out
        status = item_status(self.finish_reason)
        out = self._close(status)
        if not self.items and self.session.spec.parser is None:
            # without a parser the answer is one message even when empty (the non-streamed rule)
            item = _message(random_id("msg"), "", None, status)
            out += [self._event("response.output_item.added", {"item": {**item, "status": "in_progress"},
                                                               "output_index": 0}),
                    self._event("response.output_item.done", {"item": item, "output_index": 0})]
            self.items.append(item)
        prompt_tokens = len(self.session.prompts[0])
        final = self.final = frame.response(self.items, status, usage(prompt_tokens, self.session.completion_tokens,
                                                                      self.counter.count))
        out.append(self._event("response.incomplete" if status == "incomplete" else "response.completed",
                               {"response": final}))
        return out
