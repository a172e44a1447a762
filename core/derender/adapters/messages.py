"""The Anthropic Messages API's shapes from the one machine's events (vLLM 0.33's rules).

vLLM builds `/v1/messages` on its chat completion: the streamed message from the chat stream
(`message_stream_converter`), the non-streamed one from the chat completion
(`messages_full_converter`); `core.render_messages`' docstring records both. Here both come from
one block assembler, `MessageBlocks`, fed the session's streamed `ChoiceEvent`s by vLLM's
streaming rules:

* blocks in output order, each opened by its first non-empty delta: `thinking` (reasoning),
  `text` (content), `tool_use` (a tool-call delta with an id and a name: the call's id, as vLLM
  keeps the chat tool-call id, `chatcmpl-tool-<hex>` for hermes); a thinking block ends with a
  `signature_delta` (uuid4 hex, as vLLM); content that arrives while a tool_use block is open is
  held and sent after it as a text block of its own;
* `stop_reason`: `max_tokens` on a length finish, `tool_use` when a tool_use block was made and
  the last call's arguments are JSON, else `stop_sequence` (with `stop_sequence`, the matched
  string) on a stop string, `tool_use` for any tool_use block, `end_turn` otherwise;
* `usage`: `input_tokens` (the prompt) and `output_tokens`.

Where this departs from vLLM 0.33, so that a stream aggregates (with the anthropic SDK's own
accumulator) to exactly the non-streamed message for every output and every engine chunking:

* the non-streamed message is the aggregate of the same streamed events (`MessageCollector`),
  not a second, non-streaming parse. The two parses agree on every well-formed output; they
  differ where vLLM's stream and non-stream differ too: a tool call cut by `max_tokens` (or
  malformed) is a `tool_use` block with the input parsed so far in vLLM's stream, but its raw
  markup as text in vLLM's non-streamed answer. Both answers here are the `tool_use` block,
  which is also what Anthropic returns for a tool call cut by `max_tokens`. A tool_use block's
  `input` is the arguments parsed as the SDK parses streamed ones (jiter, partial mode);
* a message without any block is `[{"type": "text", "text": ""}]` in vLLM's non-streamed answer
  and `[]` in its stream: the stream here sends that empty text block too.

Streams may also carry `ping` events (the SSE loop sends one after `PING_INTERVAL` seconds of
silence; vLLM sends none). An error after the stream started closes the open block and ends the
stream with an `error` event and no `message_stop` (vLLM's rule).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import jiter

from core.derender.adapters.sse import named_event
from core.derender.choice import ChoiceEvent
from core.derender.session import DerenderSession
from core.errors import RequestError
from core.protocol.messages import anthropic_error_body

PING_INTERVAL = 10.0  # seconds of silence before a `ping` event
PING = named_event("ping", {"type": "ping"})

THINKING, TEXT, TOOL_USE = "thinking", "text", "tool_use"


def anthropic_stop_reason(finish_reason: str | None, stop_reason: int | str | None, tool_used: bool,
                          tool_complete: bool) -> tuple[str | None, str | None]:
    """vLLM's `_to_anthropic_stop_reason`: (stop_reason, stop_sequence)."""
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason not in ("stop", "tool_calls"):
        return None, None
    if tool_complete:
        return "tool_use", None
    if isinstance(stop_reason, str):  # a matched stop string (an int is a stop token id)
        return "stop_sequence", stop_reason
    if finish_reason == "tool_calls" or tool_used:
        return "tool_use", None
    return "end_turn", None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def tool_input(arguments: str) -> Any:
    """A tool_use block's `input`: the arguments parsed the way the anthropic SDK parses the
    streamed `partial_json` (jiter, partial mode), so both answers hold the same value; `{}`
    (the block's start value) when there are none or they are not JSON at all."""
    if not arguments:
        return {}
    try:
        return jiter.from_json(arguments.encode(), partial_mode=True)
    except ValueError:
        return {}


class _Block:
    __slots__ = ("kind", "parts", "id", "name", "signature")

    def __init__(self, kind: str, id: str | None = None, name: str | None = None) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.id = id
        self.name = name
        self.signature: str | None = None

    def dump(self) -> dict[str, Any]:
        """The block in the non-streamed message (vLLM's field order, no nulls)."""
        text = "".join(self.parts)
        if self.kind == THINKING:
            return {"type": THINKING, "thinking": text, "signature": self.signature}
        if self.kind == TEXT:
            return {"type": TEXT, "text": text}
        return {"type": TOOL_USE, "id": self.id, "name": self.name, "input": tool_input(text)}


class MessageBlocks:
    """The content blocks of one message, built from its choice's events by vLLM's streaming
    rules (module docstring). With `emit`, each step also returns the stream events it makes."""

    def __init__(self, session: DerenderSession, *, message_id: str, model: str, emit: bool) -> None:
        self.session = session
        self.message_id = message_id
        self.model = model
        self.emit = emit
        self.input_tokens = len(session.prompts[0])
        self.blocks: list[_Block] = []
        self.open: _Block | None = None
        self.pending: list[str] = []        # content held while a tool_use block is open
        self.tool_ids: dict[int, str] = {}  # tool-call index -> id
        self.tool_used = False
        self.last_tool_args: list[str] = []
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    # -- events --------------------------------------------------------------------------

    def _event(self, out: list[bytes], name: str, payload: dict[str, Any]) -> None:
        if self.emit:
            out.append(named_event(name, payload))

    def _start(self, out: list[bytes], block: _Block) -> None:
        index = len(self.blocks)
        self.blocks.append(block)
        self.open = block
        if block.kind == THINKING:
            start: dict[str, Any] = {"type": THINKING, "thinking": ""}
        elif block.kind == TEXT:
            start = {"type": TEXT, "text": ""}
        else:
            start = {"type": TOOL_USE, "id": block.id, "name": block.name, "input": {}}
        self._event(out, "content_block_start", {"type": "content_block_start", "content_block": start,
                                                 "index": index})

    def _delta(self, out: list[bytes], text: str) -> None:
        block = self.open
        assert block is not None
        block.parts.append(text)
        if block.kind == THINKING:
            delta = {"type": "thinking_delta", "thinking": text}
        elif block.kind == TEXT:
            delta = {"type": "text_delta", "text": text}
        else:
            delta = {"type": "input_json_delta", "partial_json": text}
        self._event(out, "content_block_delta", {"type": "content_block_delta", "delta": delta,
                                                 "index": len(self.blocks) - 1})

    def _stop(self, out: list[bytes]) -> None:
        block = self.open
        if block is None:
            return
        index = len(self.blocks) - 1
        if block.kind == THINKING:
            block.signature = uuid.uuid4().hex
            self._event(out, "content_block_delta", {"type": "content_block_delta", "delta": {
                "type": "signature_delta", "signature": block.signature}, "index": index})
        self._event(out, "content_block_stop", {"type": "content_block_stop", "index": index})
        self.open = None

    def _stop_and_flush(self, out: list[bytes]) -> None:
        """Close the open block; held content follows as a text block of its own."""
        self._stop(out)
        if self.pending:
            text = "".join(self.pending)
            self.pending.clear()
            self._start(out, _Block(TEXT))
            self._delta(out, text)
            self._stop(out)

    def _open_kind(self) -> str | None:
        return self.open.kind if self.open is not None else None

    def add(self, event: ChoiceEvent, out: list[bytes]) -> None:
        """One event of the choice (vLLM's order within a chunk: reasoning, content, tool calls)."""
        if event.finish_reason is not None:
            self.finish_reason, self.stop_reason = event.finish_reason, event.stop_reason
        if event.parsed:
            reasoning, content = event.reasoning, event.content
        else:
            reasoning, content = None, event.text
        if reasoning:
            if self._open_kind() != THINKING:
                self._stop_and_flush(out)
                self._start(out, _Block(THINKING))
            self._delta(out, reasoning)
        if content:
            if self._open_kind() == TOOL_USE:
                self.pending.append(content)
            else:
                if self._open_kind() != TEXT:
                    self._stop_and_flush(out)
                    self._start(out, _Block(TEXT))
                self._delta(out, content)
        for call in event.tool_calls:
            self._tool_call(call, out)

    def _tool_call(self, call: dict[str, Any], out: list[bytes]) -> None:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        call_id = call.get("id")
        if call_id is not None:
            self.tool_ids[call["index"]] = call_id
            name = function.get("name")
            open_id = self.open.id if self.open is not None and self.open.kind == TOOL_USE else None
            if open_id != call_id and name is not None:
                self._stop_and_flush(out)
                self.tool_used = True
                self.last_tool_args = []
                self._start(out, _Block(TOOL_USE, call_id, name))
        else:
            call_id = self.tool_ids.get(call["index"])
        block = self.open
        # arguments of a call whose block is no longer open are dropped (vLLM's rule)
        if arguments and call_id is not None and block is not None and block.kind == TOOL_USE and block.id == call_id:
            self.last_tool_args.append(arguments)
            self._delta(out, arguments)

    def finish(self, out: list[bytes]) -> None:
        """Close the last block (held content after it); an empty message gets an empty text block."""
        self._stop_and_flush(out)
        if not self.blocks:
            self._start(out, _Block(TEXT))
            self._stop(out)

    def stop(self) -> tuple[str | None, str | None]:
        return anthropic_stop_reason(self.finish_reason or "stop", self.stop_reason, self.tool_used,
                                     self.tool_used and _is_json("".join(self.last_tool_args)))

    def usage(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.session.completion_tokens}


class MessagesStream(MessageBlocks):
    """The Messages event stream (a `StreamWriter`, n = 1) for one request's session."""

    def __init__(self, session: DerenderSession, *, message_id: str, model: str,
                 ping_interval: float | None = PING_INTERVAL) -> None:
        super().__init__(session, message_id=message_id, model=model, emit=True)
        self.ping_interval = ping_interval

    def ping(self) -> bytes:
        return PING

    def head(self) -> list[bytes]:
        message = {"id": self.message_id, "type": "message", "role": "assistant", "content": [], "model": self.model,
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": self.input_tokens, "output_tokens": 0}}
        return [named_event("message_start", {"type": "message_start", "message": message})]

    def feed(self, prompt: int, batch: list[dict[str, Any]]) -> list[bytes]:
        out: list[bytes] = []
        for engine_event in batch:
            for event in self.session.feed(prompt, engine_event):
                self.add(event, out)
        return out

    def close(self, error: RequestError | None) -> list[bytes]:
        out: list[bytes] = []
        if error is not None:
            self._stop(out)
            out.append(named_event("error", anthropic_error_body(error.message, error.status)))
            return out
        self.finish(out)
        stop_reason, stop_sequence = self.stop()
        out.append(named_event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": stop_reason, "stop_sequence": stop_sequence}, "usage": self.usage()}))
        out.append(named_event("message_stop", {"type": "message_stop"}))
        return out


class MessageCollector(MessageBlocks):
    """The non-streamed message: the engine's output fed through the session as a stream is
    (module docstring). It stands in for the session in `proxy.streaming.collect`, which reads
    `collect` and `to_abort`."""

    def __init__(self, session: DerenderSession, *, message_id: str, model: str) -> None:
        super().__init__(session, message_id=message_id, model=model, emit=False)
        self._none: list[bytes] = []

    def collect(self, prompt: int, events: list[dict[str, Any]]) -> None:
        for engine_event in events:
            for event in self.session.feed(prompt, engine_event):
                self.add(event, self._none)

    def to_abort(self) -> list[int]:
        return self.session.to_abort()

    def message(self) -> dict[str, Any]:
        """The message, as vLLM dumps it (`exclude_none`: a null `stop_reason` / `stop_sequence` is absent)."""
        self.finish(self._none)
        stop_reason, stop_sequence = self.stop()
        out: dict[str, Any] = {"id": self.message_id, "type": "message", "role": "assistant",
                               "content": [block.dump() for block in self.blocks], "model": self.model}
        if stop_reason is not None:
            out["stop_reason"] = stop_reason
        if stop_sequence is not None:
            out["stop_sequence"] = stop_sequence
        out["usage"] = self.usage()
        return out
