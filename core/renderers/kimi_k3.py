"""Kimi K3 prompts: vLLM 0.33's renderer mode `kimi_k3` (`KimiK3ForConditionalGeneration`).

K3 ships no Jinja template. vLLM's `KimiK3Renderer` calls the model's own tokenizer,
`apply_chat_template(..., tokenize=True)`, whose remote code (`encoding_k3.py`) writes the chat as
XTML: elements `<|open|>TAG ATTRS<|sep|>` ... `<|close|>TAG<|sep|>`, each message followed by
`<|end_of_msg|>`. The prompt is a list of segments tokenized one by one: the four structural
tokens match as special tokens, every other piece (tag names, attributes, message text) is
tokenized as text, so the text of a special token written in a message stays text (an added token
that is not special still matches, as the tokenizer's own text encoding does). This module builds
the same segments and tokenizes them the same way; it returns ids, not a prompt string.

What vLLM does around the tokenizer, in order:

* the conversation is vLLM's (`core.chat_template.build_conversation`, content as a string; tool-call
  arguments parsed, arguments that are no JSON object become `{}`);
* tool results right after an assistant's calls are put back in the order of the calls, matched by
  `tool_call_id` or the `"NAME:INDEX"` alias (0-based), and get the call's `tool` name and 1-based
  `index`; one result that matches nothing leaves the block as it is (`order_tool_results`);
* the template kwargs: `enable_thinking` becomes `thinking` (unless given), `reasoning_effort`
  "none" turns thinking off and any other effort becomes `thinking_effort` (unless given); an effort
  that is not low / high / max is a 400; the request's `tool_choice` (only when it has tools, and
  not "auto") and `response_format` are passed as kwargs too (`template_kwargs`).

The encoder (`segments`): the tool declaration (tools deep-sorted, compact JSON), the thinking-effort
note when thinking (effort `max` by default), the messages (system and user with an optional `name`,
assistant with its think channel when thinking, its response channel and its calls; tool results
named by their call; developer and other roles are not written), the tool-choice note ("required" /
"none"), the response-format note (json_object, json_schema with the `response_schema` kwarg or the
format's schema), then the assistant's turn opened on the think or response channel. A tool result
with no name to give it is a 400 with the encoder's message; `continue_final_message` changes
nothing (the encoder closes every message).

Long runs: Kimi's tokenizer cuts text into pieces with at most 25,000 consecutive whitespace or
non-whitespace characters before encoding each (`split_runs`), and so do we. Text goes through the
fast encoder (core/fast_encode.py) built on the tokenizer's `text_backend` with special tokens read
as text, whose word and segment caches make the turns a conversation re-sends cheap; a tokenizer
it does not take is encoded by the Rust backend in one batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from core.fast_encode import FastEncoder, cached_encoder
from core.protocol.common import VLLMValidationError

OPEN, CLOSE, SEP, END_OF_MSG = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"
STRUCTURAL_TOKENS = (OPEN, CLOSE, SEP, END_OF_MSG)
EFFORTS = ("low", "high", "max")
DEFAULT_EFFORT = "max"
MAX_RUN_CHARS = 25_000  # Kimi's tokenizer: the longest run of (non-)whitespace encoded at once
MAX_ENCODE_CHARS = 400_000  # and the longest text it hands its encoder

EFFORT_NOTE = ("`thinking_effort` guides on how much to think in your thinking channel (not including the "
               "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
               "Now the system is invoked with `thinking_effort={effort}`.")
TOOLS_NOTE = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n{tools}\n```"
TOOL_CHOICE_NOTE = "The system is invoked with `tool_choice={choice}`.\nYou MUST {must} in the next message."
JSON_NOTE = ("The system is invoked with `response_format={kind}`.\nYour response must be raw JSON data without "
             "markdown code blocks (```json) or any additional formatting.")
SCHEMA_NOTE = "\nThe JSON data must match the following schema:\n```json\n{schema}\n```"
NO_TOOL_NAME = ("Kimi K3 tool messages need a resolvable tool name: carry `tool`/`name`, or match a preceding "
                "assistant tool_call by order.")

Segment = tuple[str, bool]  # (text, structural: its special tokens match)


class EncodeError(ValueError):
    """A conversation the encoder refuses (vLLM answers 400 with this message)."""


# -- what vLLM's renderer does before the tokenizer -------------------------------------------


def template_kwargs(kwargs: dict[str, Any], tool_choice: Any, response_format: Any) -> dict[str, Any]:
    """vLLM's kwargs for K3's tokenizer: thinking and effort mapped, tool_choice and
    response_format (already JSON-able values) added. A copy; raises the 400 for a bad effort."""
    out = dict(kwargs)
    enable = out.pop("enable_thinking", None)
    if enable is not None:
        out.setdefault("thinking", enable)
    effort = out.pop("reasoning_effort", None)
    if effort == "none":
        out.setdefault("thinking", False)
    elif effort is not None:
        out.setdefault("thinking_effort", effort)
    chosen = out.get("thinking_effort")
    if chosen is not None and not (isinstance(chosen, str) and chosen in EFFORTS):
        raise VLLMValidationError(f"Kimi K3 supports thinking_effort values: {', '.join(EFFORTS)}",
                                  parameter="thinking_effort", value=chosen)
    if tool_choice not in (None, "auto"):
        out["tool_choice"] = tool_choice
    if response_format is not None:
        out["response_format"] = response_format
    return out


def order_tool_results(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool results that follow an assistant's calls, in the order of the calls (vLLM's
    `_normalize_k3_tool_messages`); new dicts, the conversation is not changed."""
    out: list[dict[str, Any]] = []
    i, n = 0, len(conversation)
    while i < n:
        message = conversation[i]
        out.append(dict(message))
        i += 1
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        targets: dict[str, tuple[int, str]] = {}
        for position, call in enumerate(calls):
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or not name:
                continue
            aliases = [f"{name}:{position}"]
            if call.get("id"):
                aliases.insert(0, str(call["id"]))
            for alias in aliases:
                targets.setdefault(alias, (position, name))
        start = i
        while i < n and conversation[i].get("role") == "tool":
            i += 1
        resolved: list[tuple[int, int, dict[str, Any]]] = []
        for order, result in enumerate(conversation[start:i]):
            call_id = result.get("tool_call_id")
            target = targets.get(str(call_id)) if call_id is not None else None
            if target is None:  # one unmatched result: the block keeps its order
                out.extend(dict(item) for item in conversation[start:i])
                break
            resolved.append((target[0], order, {**result, "tool": target[1], "index": target[0] + 1}))
        else:
            resolved.sort(key=lambda item: (item[0], item[1]))
            out.extend(item for _, _, item in resolved)
    return out


def dump_value(value: Any) -> Any:
    """A request model as vLLM hands it to the tokenizer (`model_dump(mode="json", exclude_none=True)`)."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else value


# -- the encoder ------------------------------------------------------------------------------


def _text(text: Any) -> list[Segment]:
    text = str(text)
    return [(text, False)] if text else []


def _escape(value: Any) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;")


def _open(tag: str, attrs: list[tuple[str, Any]] | tuple[()] = ()) -> list[Segment]:
    out = [(OPEN, True), *_text(tag)]
    for key, value in attrs:  # the value is a segment of its own
        out += [*_text(f' {key}="'), *_text(_escape(value)), ('"', False)]
    out.append((SEP, True))
    return out


def _close(tag: str) -> list[Segment]:
    return [(CLOSE, True), *_text(tag), (SEP, True)]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _sorted_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_deep(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_deep(item) for item in value]
    return value


def _system_note(kind: str, body: str) -> list[Segment]:
    return [*_open("message", [("role", "system"), ("type", kind)]), *_text(body.strip()), *_close("message"),
            (END_OF_MSG, True)]


def _content(content: Any) -> list[Segment]:
    if content is None:
        return []
    if isinstance(content, str):
        return _text(content)
    out: list[Segment] = []
    for part in content:  # structured tool-result content (vLLM keeps it when a part is not text)
        out += _text(part["text"])
    return out


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def _calls(calls: list[dict[str, Any]]) -> list[Segment]:
    out = _open("tools")
    for index, call in enumerate(calls, start=1):
        function = call.get("function", call)
        out += _open("call", [("tool", function["name"]), ("index", index)])
        for key, value in (function.get("arguments") or {}).items():
            out += _open("argument", [("key", key), ("type", _value_type(value))])
            out += _text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            out += _close("argument")
        out += _close("call")
    return out + _close("tools")


def _assistant(message: dict[str, Any], thinking: bool) -> list[Segment]:
    out: list[Segment] = []
    if thinking:
        out += _open("think")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning is not None and str(reasoning).strip():
            out += _text(reasoning)
        out += _close("think")
    out += [*_open("response"), *_content(message.get("content")), *_close("response")]
    if message.get("tool_calls"):
        out += _calls(message["tool_calls"])
    return out


def _named(role: str, message: dict[str, Any]) -> list[tuple[str, Any]]:
    attrs: list[tuple[str, Any]] = [("role", role)]
    if message.get("name"):
        attrs.append(("name", message["name"]))
    return attrs


def _schema(response_format: Any) -> Any:
    """The schema of a json_schema response format (vLLM's dump names it `json_schema`)."""
    spec = _field(response_format, "json_schema")
    if spec is None:
        return None
    return _field(spec, "schema", _field(spec, "json_schema", spec))


def _field(value: Any, key: str, default: Any = None) -> Any:
    return value.get(key, default) if isinstance(value, dict) else getattr(value, key, default)


def segments(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
             kwargs: dict[str, Any]) -> list[Segment]:
    """The XTML segments of a conversation (K3's `build_chat_segments`, with vLLM's kwargs)."""
    thinking = bool(kwargs.get("thinking", True))
    out: list[Segment] = []
    if tools:
        out += _system_note("tool-declare", TOOLS_NOTE.format(tools=_compact(_sorted_deep(tools))))
    if thinking:
        effort = kwargs.get("thinking_effort")
        out += _system_note("thinking-effort", EFFORT_NOTE.format(effort=DEFAULT_EFFORT if effort is None else effort))

    prior_calls: list[dict[str, Any]] | None = None
    counter = 0
    for message in messages:
        role = message.get("role")
        if role in ("user", "system"):
            out += [*_open("message", _named(role, message)), *_content(message.get("content")),
                    *_close("message"), (END_OF_MSG, True)]
        elif role == "assistant":
            prior_calls, counter = message.get("tool_calls"), 0
            out += [*_open("message", _named(role, message)), *_assistant(message, thinking), *_close("message"),
                    (END_OF_MSG, True)]
        elif role == "tool":
            counter += 1
            name = message.get("tool", message.get("name"))
            if name is None and prior_calls and counter <= len(prior_calls):
                call = prior_calls[counter - 1]
                name = call.get("function", call)["name"]
            if name is None:
                raise EncodeError(NO_TOOL_NAME)
            index = message.get("index", counter)
            out += [*_open("message", [("role", "tool"), ("tool", name), ("index", index)]),
                    *_content(message.get("content")), *_close("message"), (END_OF_MSG, True)]

    choice = kwargs.get("tool_choice")
    if isinstance(choice, str) and choice in ("required", "none"):
        must = "call tools" if choice == "required" else "NOT call any tools"
        out += _system_note("tool-choice", TOOL_CHOICE_NOTE.format(choice=choice, must=must))

    response_format = kwargs.get("response_format")
    kind = _field(response_format, "type", response_format)
    if kind == "json_object":
        out += _system_note("response-format", JSON_NOTE.format(kind=kind))
    elif kind == "json_schema":
        schema = kwargs.get("response_schema")
        if schema is None:
            schema = _schema(response_format)
        out += _system_note("response-format", JSON_NOTE.format(kind=kind)
                            + SCHEMA_NOTE.format(schema=_compact(_sorted_deep(schema))))

    if kwargs.get("add_generation_prompt", True):
        out += [*_open("message", [("role", "assistant")]), *_open("think" if thinking else "response")]
    return out


# -- tokenization -----------------------------------------------------------------------------


def split_runs(text: str) -> Iterator[str]:
    """Kimi's tokenizer's cuts: pieces of at most MAX_ENCODE_CHARS characters, then cut so that no
    piece has more than MAX_RUN_CHARS consecutive whitespace or non-whitespace characters."""
    for start in range(0, len(text), MAX_ENCODE_CHARS):
        chunk = text[start:start + MAX_ENCODE_CHARS]
        if len(chunk) <= MAX_RUN_CHARS:
            yield chunk
            continue
        run, in_space, cut = 0, chunk[0].isspace(), 0
        for i, char in enumerate(chunk):
            space = char.isspace()
            if space != in_space:
                run, in_space = 1, space
            else:
                run += 1
                if run > MAX_RUN_CHARS:
                    yield chunk[cut:i]
                    cut, run = i, 1
        yield chunk[cut:]


def text_encoder(tokenizer: Any) -> FastEncoder | None:
    """The fast encoder (core/fast_encode.py) of `Tokenizer.text_backend`, built once per tokenizer
    (None when its pipeline is not one the fast encoder takes): its word and segment caches make
    the messages a conversation re-sends each turn cheap."""
    return cached_encoder(tokenizer, specials_as_text=True)


def encode_segments(tokenizer: Any, segs: list[Segment]) -> list[int]:
    """Each segment on its own: structural ones with special tokens matched, text with them read as
    text (the fast encoder of `Tokenizer.text_backend`; without one, the backend itself, every text
    piece in one batch)."""
    fast = text_encoder(tokenizer)
    out: list[int] = []
    if fast is not None:
        for text, structural in segs:
            if structural:
                out.extend(_structural_ids(tokenizer, text))
            else:
                for piece in split_runs(text):
                    out.extend(fast.encode(piece))
        return out
    pieces = [piece for text, structural in segs if not structural for piece in split_runs(text)]
    encoded = iter(tokenizer.text_backend.encode_batch(pieces, add_special_tokens=False) if pieces else [])
    for text, structural in segs:
        if structural:
            out.extend(_structural_ids(tokenizer, text))
        else:
            for _ in split_runs(text):
                out.extend(next(encoded).ids)
    return out


def _structural_ids(tokenizer: Any, text: str) -> list[int]:
    token = tokenizer.token_to_id(text)
    return [token] if token is not None else tokenizer.encode(text)


def render_chat_prompt(tokenizer: Any, conversation: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       kwargs: dict[str, Any], *, tool_choice: Any = None, response_format: Any = None) -> list[int]:
    """The prompt's token ids, as vLLM's kimi_k3 renderer gives them. Raises VLLMValidationError."""
    encoder_kwargs = template_kwargs(kwargs, dump_value(tool_choice), dump_value(response_format))
    try:
        segs = segments(order_tool_results(conversation), tools, encoder_kwargs)
    except EncodeError as exc:
        raise VLLMValidationError(str(exc)) from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise VLLMValidationError(f"kimi_k3 cannot encode these messages: {exc!r}") from None
    return encode_segments(tokenizer, segs)
