"""The Responses API's output for gpt-oss (Harmony), as vLLM 0.33 builds it (`HarmonyContext`,
`responses/harmony.py` `harmony_to_response_output`, `streaming_events.py`).

Unlike the other families, whose output is split into one reasoning, one content and the calls,
vLLM turns each Harmony message of a gpt-oss answer into its own item, in order:

* an `analysis` message (and one to the builtin `python` recipient): a `reasoning` item, its text
  as it is (several messages, several items: no "\\n" join as in chat);
* a `final` message, or a `commentary` one without recipient (a preamble): a `message` item with
  one `output_text` part (also when its text is empty);
* a message to `functions.NAME` (or to a bare NAME that is one of the request's function tools,
  namespaces flattened): a `function_call` item, `id` `fc_<hex>`, `call_id` `call_<hex>` (the same
  hex), its arguments the raw text (not re-serialized as chat does);
* a message to another recipient (a tool the model was not given: MCP, `browser.*`): an
  `mcp_call` item (`server_label` the recipient's first dotted part, `name` its last);
* messages of other authors, or on other channels: nothing.

The last item is `incomplete` when the end of output closed its message (a length cut, or an
output that ends inside a header, which vLLM recovers as a final message of the tokens since the
last message). The response is `incomplete` when there is no item at all or finish_reason is
length. `usage.output_tokens_details.reasoning_tokens` counts the non-special tokens of analysis
messages and of commentary messages to a recipient (function arguments included).

Streaming follows vLLM's events per message (`output_item.added`, `content_part.added` and the
deltas as the message's text arrives; the text / arguments `done` events, `content_part.done` and
`output_item.done` when it ends). Where vLLM's stream leaves out an item its final response has
(an empty message: no delta, so vLLM sends no event, yet counts an `output_index` for it), we send
its `added` and `done` events when it ends, so the streamed items are the final response's items
with the same ids and indexes. Logprobs are refused for gpt-oss (vLLM's 400), so events carry none.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from core.derender.adapters.responses import ResponsesFrame, ResponsesStream, usage
from core.derender.session import DerenderSession
from core.errors import RequestError
from core.parsers.families.harmony import FIRST_SPECIAL, HarmonyMachine, new_machine
from core.renderers.harmony_responses import dump_messages

REASONING, MESSAGE, CALL, MCP, NOTHING = "reasoning", "message", "function_call", "mcp_call", "nothing"
BUILTIN_RECIPIENTS = ("python", "browser", "container")
ID_PREFIXES = {REASONING: "rs", MESSAGE: "msg", MCP: "mcp"}
MCP_LABELS = {"python": "code_interpreter", "browser": "web_search_preview", "container": "container"}


def _hex() -> str:
    return secrets.token_hex(8)


def is_function_recipient(recipient: str, function_names: frozenset[str]) -> bool:
    """vLLM's is_function_recipient with the request's function names (bare names must be one)."""
    if not recipient or recipient.startswith("<|") or recipient == "assistant":
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    if recipient in BUILTIN_RECIPIENTS or recipient.split(".", 1)[0] in BUILTIN_RECIPIENTS:
        return False
    return recipient in function_names


def item_kind(header: dict[str, Any], function_names: frozenset[str]) -> str:
    if header["role"] != "assistant":
        return NOTHING  # a tool's message to the assistant is not output
    recipient, channel = header["recipient"], header["channel"]
    if recipient is not None:
        if is_function_recipient(recipient, function_names):
            return CALL
        if recipient == "python":
            return REASONING
        return MCP
    if channel == "analysis":
        return REASONING
    return MESSAGE if channel in ("final", "commentary") else NOTHING


def counts_as_reasoning(header: dict[str, Any]) -> bool:
    return header["channel"] == "analysis" or (header["channel"] == "commentary" and header["recipient"] is not None)


class HarmonyMessages(HarmonyMachine):
    """Harmony output read message by message (the chat parsers' machine, with per-message hooks):
    `pending` collects ("text", message, piece) and ("end", message) in order."""

    def __init__(self, tokenizer: Any, function_names: frozenset[str]) -> None:
        super().__init__(tokenizer, new_machine(), tools=False, reasoning=False)
        self.function_names = function_names
        self.current: dict[str, Any] | None = None
        self.pending: list[tuple[Any, ...]] = []
        self.reasoning_tokens = 0
        self.flushed = False  # the end of output closed the last message

    def _opened(self, header: dict[str, Any]) -> None:
        self.current = {"kind": item_kind(header, self.function_names), "header": header, "text": [],
                        "reasoning": counts_as_reasoning(header)}

    def _text(self, msg: dict[str, Any], text: str) -> None:
        current = self.current
        if text and current is not None:
            current["text"].append(text)
            self.pending.append(("text", current, text))

    def _content_token(self, tid: int) -> None:
        current = self.current
        if current is not None and current["reasoning"] and tid < FIRST_SPECIAL:
            self.reasoning_tokens += 1
        super()._content_token(tid)

    def _closed(self) -> None:
        if self.current is not None:
            self.pending.append(("end", self.current))
        self.current = None

    def finish(self) -> None:
        """The end of output (vLLM's flush): closes an open message, or recovers a header."""
        s = self.s
        if s["m"] == 2:
            self.flushed = True
            self._end_message()
        elif s["m"] == 1:
            # vLLM: the parser errs inside a header; the tokens since the last message, decoded with
            # special tokens kept, become a final-channel message
            text = self.tokenizer.decode(s["rt"], skip_special_tokens=False)
            s["rt"], s["ro"], s["m"] = [], False, 0
            self.flushed = True
            self._opened({"role": "assistant", "channel": "final", "recipient": None, "content_type": None})
            self._text({}, text)
            self._closed()

    def take(self) -> list[tuple[Any, ...]]:
        out, self.pending = self.pending, []
        return out


# -- items ---------------------------------------------------------------------------------------


def _call_name(message: dict[str, Any]) -> str:
    return message["header"]["recipient"].removeprefix("functions.")


def _mcp_names(recipient: str) -> tuple[str, str]:
    """(server_label, name) of a recipient (vLLM's _parse_mcp_call)."""
    if recipient in MCP_LABELS:
        return MCP_LABELS[recipient], recipient
    if "." in recipient:
        parts = recipient.split(".")
        return parts[0], parts[-1]
    return recipient, recipient


def reasoning_item(item_id: str, text: str, status: str | None) -> dict[str, Any]:
    return {"id": item_id, "summary": [], "type": "reasoning", "content": [{"text": text, "type": "reasoning_text"}],
            "encrypted_content": None, "status": status}


def output_text(text: str) -> dict[str, Any]:
    return {"annotations": [], "text": text, "type": "output_text", "logprobs": None}


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {"id": item_id, "content": [output_text(text)], "role": "assistant", "status": status, "type": "message",
            "phase": None}


def mcp_item(item_id: str, recipient: str, arguments: str, status: str) -> dict[str, Any]:
    label, name = _mcp_names(recipient)
    return {"id": item_id, "arguments": arguments, "name": name, "server_label": label, "type": "mcp_call",
            "approval_request_id": None, "error": None, "output": None, "status": status}


def new_ids(kind: str) -> dict[str, str]:
    """The ids of a new item (a function call's id and call_id share their hex, as vLLM's)."""
    h = _hex()
    if kind == CALL:
        return {"id": f"fc_{h}", "call_id": f"call_{h}"}
    return {"id": f"{ID_PREFIXES[kind]}_{h}"}


def make_item(frame: ResponsesFrame, message: dict[str, Any], ids: dict[str, str], status: str) -> dict[str, Any]:
    kind, text = message["kind"], "".join(message["text"])
    if kind == REASONING:
        return reasoning_item(ids["id"], text, None)  # vLLM gives a reasoning item no status
    if kind == MESSAGE:
        return message_item(ids["id"], text, status)
    if kind == CALL:
        return frame.call_item(ids["call_id"], _call_name(message), text, status, ids["id"])
    return mcp_item(ids["id"], message["header"]["recipient"], text, status)


def final_status(items: list[dict[str, Any]], finish_reason: str | None) -> str:
    if not items or finish_reason == "length":
        return "incomplete"
    return "cancelled" if finish_reason == "abort" else "completed"


def harmony_output(frame: ResponsesFrame, messages: list[dict[str, Any]], flushed: bool,
                   ids: list[dict[str, str] | None] | None = None) -> list[dict[str, Any]]:
    """The items of the ended messages (vLLM's harmony_to_response_output per message); `ids`: the
    streamed items' ids, per message."""
    items = []
    for n, message in enumerate(messages):
        if message["kind"] == NOTHING:
            continue
        item_ids = ids[n] if ids is not None and ids[n] is not None else new_ids(message["kind"])
        incomplete = flushed and n == len(messages) - 1
        items.append(make_item(frame, message, item_ids, "incomplete" if incomplete else "completed"))
    return items


def harmony_message(message: dict[str, Any]) -> Any:
    """An ended message as an openai_harmony Message (for the store: the next turn's history)."""
    from openai_harmony import Message, Role

    header = message["header"]
    out = Message.from_role_and_content(Role(header["role"]), "".join(message["text"]))
    if header["channel"]:
        out = out.with_channel(header["channel"])
    if header["recipient"]:
        out = out.with_recipient(header["recipient"])
    if header["content_type"]:
        out = out.with_content_type(header["content_type"])
    return out


def function_names(request: Any) -> frozenset[str]:
    """vLLM's extract_function_tool_names: function tools, namespace members flattened."""
    names: list[str] = []
    for tool in request.tools:
        if tool.type == "function":
            names.append(tool.name)
        elif tool.type == "namespace":
            names.extend(f"{tool.name}__{member.name}" for member in tool.tools if member.type == "function")
    return frozenset(names)


# -- non-streamed --------------------------------------------------------------------------------


class HarmonyAnswer:
    """What a whole gpt-oss output says: its ended messages, reasoning token count, flush."""

    def __init__(self, tokenizer: Any, names: frozenset[str], token_ids: Sequence[int]) -> None:
        reader = HarmonyMessages(tokenizer, names)
        reader.feed(token_ids)
        reader.finish()
        self.messages = [event[1] for event in reader.take() if event[0] == "end"]
        self.reasoning_tokens = reader.reasoning_tokens
        self.flushed = reader.flushed


def with_messages(response: dict[str, Any], shown: list[Any] | None, output: list[Any]) -> dict[str, Any]:
    """`enable_response_messages`: the prompt's and the output's Harmony messages in the response
    (vLLM's `to_dict` form; none is null). `shown`: the prompt's messages, None when not asked."""
    if shown is not None:
        response["input_messages"] = dump_messages(shown) or None
        response["output_messages"] = dump_messages(output) or None
    return response


def harmony_non_streamed(frame: ResponsesFrame, session: DerenderSession, names: frozenset[str],
                         shown: list[Any] | None = None) -> tuple[dict[str, Any], list[Any]]:
    """(the response object, the output's Harmony messages)."""
    result = session.results()[0]
    answer = HarmonyAnswer(session.spec.settings.model.tokenizer, names, result.token_ids)
    output = harmony_output(frame, answer.messages, answer.flushed)
    status = final_status(output, result.finish_reason)
    response = frame.response(output, status, usage(len(session.prompts[0]), session.completion_tokens,
                                                    answer.reasoning_tokens))
    messages = [harmony_message(m) for m in answer.messages]
    return with_messages(response, shown, messages), messages


# -- the event stream ------------------------------------------------------------------------------


class HarmonyResponsesStream:
    """Responses streaming events for a gpt-oss session (a `StreamWriter`, n = 1)."""

    def __init__(self, session: DerenderSession, frame: ResponsesFrame, names: frozenset[str],
                 shown: list[Any] | None = None) -> None:
        self.session = session
        self.frame = frame
        self.shown = shown  # the prompt's messages, for enable_response_messages
        self.reader = HarmonyMessages(session.spec.settings.model.tokenizer, names)
        self.sequence = 0
        self.output_index = 0
        self.open: dict[str, Any] | None = None  # the message whose item is open, with its ids
        self.ended: list[dict[str, Any]] = []  # ended messages
        self.ids: list[dict[str, str] | None] = []  # per ended message, its streamed item's ids
        self.finish_reason: str | None = None
        self.final: dict[str, Any] | None = None
        self.output_messages: list[Any] = []

    # the framing (sequence numbers) and the first two events are the generic stream's
    _event = ResponsesStream._event
    head = ResponsesStream.head

    # -- one message's item ------------------------------------------------------------------

    def _added(self, message: dict[str, Any]) -> list[bytes]:
        kind, index = message["kind"], self.output_index
        ids = message["ids"] = new_ids(kind)
        item_id = ids["id"]
        if kind == REASONING:
            return [self._event("response.output_item.added", {"item": {
                        "id": item_id, "summary": [], "type": "reasoning", "content": None, "encrypted_content": None,
                        "status": "in_progress"}, "output_index": index}),
                    self._event("response.content_part.added", {
                        "content_index": 0, "item_id": item_id, "output_index": index,
                        "part": {"text": "", "type": "reasoning_text"}})]
        if kind == MESSAGE:
            item = {**message_item(item_id, "", "in_progress"), "content": []}
            return [self._event("response.output_item.added", {"item": item, "output_index": index}),
                    self._event("response.content_part.added", {
                        "content_index": 0, "item_id": item_id, "output_index": index,
                        "part": {**output_text(""), "logprobs": []}})]
        if kind == CALL:
            item = self.frame.call_item(ids["call_id"], _call_name(message), "", "in_progress", item_id)
            return [self._event("response.output_item.added", {"item": item, "output_index": index})]
        item = mcp_item(item_id, message["header"]["recipient"], "", "in_progress")
        return [self._event("response.output_item.added", {"item": item, "output_index": index}),
                self._event("response.mcp_call.in_progress", {"item_id": item_id, "output_index": index})]

    def _delta(self, message: dict[str, Any], text: str) -> list[bytes]:
        if message["kind"] == NOTHING:
            return []
        out = []
        if self.open is not message:
            self.open = message
            out += self._added(message)
        kind, item_id, index = message["kind"], message["ids"]["id"], self.output_index
        if kind == REASONING:
            out.append(self._event("response.reasoning_text.delta", {
                "content_index": 0, "delta": text, "item_id": item_id, "output_index": index}))
        elif kind == MESSAGE:
            out.append(self._event("response.output_text.delta", {
                "content_index": 0, "delta": text, "item_id": item_id, "logprobs": [], "output_index": index}))
        elif kind == CALL:
            out.append(self._event("response.function_call_arguments.delta", {
                "delta": text, "item_id": item_id, "output_index": index}))
        else:
            out.append(self._event("response.mcp_call_arguments.delta", {
                "delta": text, "item_id": item_id, "output_index": index}))
        return out

    def _end(self, message: dict[str, Any]) -> list[bytes]:
        self.ended.append(message)
        if message["kind"] == NOTHING:
            self.ids.append(None)
            return []
        out = [] if self.open is message else self._added(message)  # an empty message: announced now
        self.open = None
        ids, index = message["ids"], self.output_index
        self.ids.append(ids)
        item_id, text = ids["id"], "".join(message["text"])
        item = make_item(self.frame, message, ids, "completed")
        kind = message["kind"]
        if kind == REASONING:
            item["status"] = "completed"
            part = {"text": text, "type": "reasoning_text"}
            out += [self._event("response.reasoning_text.done", {
                        "content_index": 0, "item_id": item_id, "output_index": index, "text": text}),
                    self._event("response.content_part.done", {
                        "content_index": 0, "item_id": item_id, "output_index": index, "part": part})]
        elif kind == MESSAGE:
            out += [self._event("response.output_text.done", {
                        "content_index": 0, "item_id": item_id, "logprobs": [], "output_index": index, "text": text}),
                    self._event("response.content_part.done", {
                        "content_index": 0, "item_id": item_id, "output_index": index, "part": output_text(text)})]
        elif kind == CALL:
            out.append(self._event("response.function_call_arguments.done", {
                "arguments": text, "item_id": item_id, "output_index": index, "name": item["name"]}))
        else:
            out += [self._event("response.mcp_call_arguments.done", {
                        "arguments": text, "item_id": item_id, "output_index": index, "name": item["name"]}),
                    self._event("response.mcp_call.completed", {"item_id": item_id, "output_index": index})]
        out.append(self._event("response.output_item.done", {"item": item, "output_index": index}))
        self.output_index += 1
        return out

    def _drain(self) -> list[bytes]:
        out: list[bytes] = []
        for event in self.reader.take():
            out += self._delta(event[1], event[2]) if event[0] == "text" else self._end(event[1])
        return out

    # -- the StreamWriter --------------------------------------------------------------------

    def feed(self, prompt: int, batch: list[dict[str, Any]]) -> list[bytes]:
        out: list[bytes] = []
        for engine_event in batch:
            for event in self.session.feed(prompt, engine_event):
                out += self.feed_tokens(event.token_ids, event.finish_reason)
        return out

    def feed_tokens(self, token_ids: Sequence[int] | None, finish_reason: str | None) -> list[bytes]:
        """The events of one chunk of output ids (the session's, after stop strings and the cap)."""
        reader = self.reader
        if token_ids:
            reader.feed(token_ids)
        if finish_reason is not None:
            self.finish_reason = finish_reason
            reader.finish()
        return self._drain()

    def close(self, error: RequestError | None) -> list[bytes]:
        frame = self.frame
        output = harmony_output(frame, self.ended, self.reader.flushed, self.ids)
        self.output_messages[:] = [harmony_message(m) for m in self.ended]  # the list given out stays valid
        if error is not None:
            out = [self._event("error", {"code": str(error.status), "message": error.message, "param": error.param})]
            failed = self.final = frame.response(output, "failed", None,
                                                 {"code": "server_error", "message": error.message})
            out.append(self._event("response.failed", {"response": failed}))
            return out
        status = final_status(output, self.finish_reason)
        final = self.final = with_messages(frame.response(output, status, usage(
            len(self.session.prompts[0]), self.session.completion_tokens, self.reader.reasoning_tokens)),
            self.shown, self.output_messages)
        return [self._event("response.incomplete" if status == "incomplete" else "response.completed",
                            {"response": final})]


__all__ = ["HarmonyResponsesStream", "harmony_non_streamed", "harmony_output", "HarmonyMessages", "function_names"]
