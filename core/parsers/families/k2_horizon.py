"""k2_horizon: vLLM 0.33's K2 Horizon (MBZUAI-IFM) reasoning and tool parsers (both classic).

K2 Horizon writes its markup as `<ifm|...>` tags (added tokens that are not special, so they
stay in the text vLLM decodes):

    <ifm|think>...</ifm|think>answer
    <ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>
      <ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>

vLLM's non-streaming rules (vllm/reasoning/k2_horizon_reasoning_parser.py,
vllm/tool_parsers/k2_horizon_tool_parser.py), which `parse_complete` / `extract_complete` follow
exactly but for two reasoning shapes where vLLM's answer takes back what its own stream sent
(core/parsers/README.md, "vLLM 0.33 bugs we do not follow"):

* reasoning: the think tags are chosen by `reasoning_effort` in the template kwargs: "high"
  (default) `<ifm|think>`, "medium" `<ifm|think_fast>`, "low" `<ifm|think_faster>` (any other
  value: the request is refused). One leading open tag is dropped; then the text before the
  first close tag is reasoning and the rest content; without a close tag, the text before the
  first `<ifm|tool_calls>` is reasoning and the content starts at that tag; with neither, vLLM's
  reasoning is "" and the whole output content. Ours: the first of the close tag and
  `<ifm|tool_calls>` ends the reasoning (vLLM: a close tag anywhere first), and with neither the
  whole output is reasoning, as both streams send it. `is_reasoning_end`: the newest of the open
  tag, the close tag and `<ifm|tool_calls>` in the ids, when it is not the open tag.
* tools: the first `<ifm|tool_calls>` up to the first `</ifm|tool_calls>` after it (never
  closed: no calls) must hold only `<ifm|tool_call>BODY</ifm|tool_call>` calls and whitespace;
  every call must parse, else there are no calls and the output is content as written. The body
  format is the request's own `chat_template_kwargs.tool_call_format`: "xml" (default): the name,
  then `<ifm|arg_key>K</ifm|arg_key><ifm|arg_value>V</ifm|arg_value>` pairs (whitespace between),
  "xml_typed": each pair with `<ifm|arg_type>T</ifm|arg_type>` between key and value, "json":
  `{"name": ..., "arguments": {...}}`. The name is non-empty without whitespace, one of the
  request's tools (when it has any) and the named tool of a named tool_choice. XML values are
  typed by the schema (an explicit type picks among the schema's types, or is the type when the
  property has no schema), JSON values re-typed by their property's schema; a repeated key, a
  missing key or type, text between pairs, a NaN anywhere: the call fails. Arguments are
  `json.dumps(..., ensure_ascii=False)`. With calls, the content is the text before the group and
  after it (not stripped; None when blank). "required" and a named tool read the same markup
  (`supports_required_and_named` is false), and the request is not adjusted (no JSON schema, no
  structural tag, `skip_special_tokens` untouched) but for refusing an unknown `tool_call_format`.

Streaming: reasoning streams until a close tag or `<ifm|tool_calls>` (only a partial tag held).
Tools: text before the group streams (a partial `<ifm|tool_calls>` held); in the group each call's
body is held until its `</ifm|tool_call>` and the call goes out whole when it parses; until the
first call goes out the group's text is held too, so a group that fails before it streams the
non-streaming answer exactly. The state holds one call's text. Where no stream can follow the
non-streaming rule (core/parsers/README.md): a group that fails after a call went out (the answer
has no calls; the stream sends the failing part and the rest as content).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from core.errors import bad_request
from core.parsers.base import ParserContext, ReasoningParser, State, ToolCallDelta, ToolParser
from core.parsers.coercion import coerce, finite, schema_types, tool_properties
from core.parsers.jsonstream import dumps
from core.parsers.text import find_first, partial_suffix

EFFORT_TAGS = {"high": ("<ifm|think>", "</ifm|think>"), "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
               "low": ("<ifm|think_faster>", "</ifm|think_faster>")}
CALLS_OPEN, CALLS_CLOSE = "<ifm|tool_calls>", "</ifm|tool_calls>"
CALL_OPEN, CALL_CLOSE = "<ifm|tool_call>", "</ifm|tool_call>"
KEY_OPEN, KEY_CLOSE = "<ifm|arg_key>", "</ifm|arg_key>"
TYPE_OPEN, TYPE_CLOSE = "<ifm|arg_type>", "</ifm|arg_type>"
VALUE_OPEN, VALUE_CLOSE = "<ifm|arg_value>", "</ifm|arg_value>"
ARG_TAGS = (KEY_OPEN, KEY_CLOSE, TYPE_OPEN, TYPE_CLOSE, VALUE_OPEN, VALUE_CLOSE)
TOOL_CALL_FORMATS = ("json", "xml", "xml_typed")

_CALL = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.DOTALL)
_ARG = re.compile(re.escape(KEY_OPEN) + r"(.*?)" + re.escape(KEY_CLOSE) + r"\s*(?:" + re.escape(TYPE_OPEN)
                  + r"(.*?)" + re.escape(TYPE_CLOSE) + r"\s*)?" + re.escape(VALUE_OPEN) + r"(.*?)"
                  + re.escape(VALUE_CLOSE), re.DOTALL)


def effort_tags(kwargs: dict[str, Any]) -> tuple[str, str]:
    """The think tags of the template kwargs' `reasoning_effort` (vLLM refuses any other value)."""
    effort = kwargs.get("reasoning_effort", "high")
    if not isinstance(effort, str) or effort not in EFFORT_TAGS:
        raise bad_request(f"Unsupported reasoning_effort {effort!r}. Supported values: {', '.join(EFFORT_TAGS)}.")
    return EFFORT_TAGS[effort]


class K2HorizonReasoningParser(ReasoningParser):
    name = "k2_horizon"

    # phases (serialized as these letters); OPENING: a leading open tag may still come
    OPENING, REASONING, CONTENT = "O", "R", "C"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.start_tag, self.end_tag = effort_tags(ctx.chat_template_kwargs)
        tok = ctx.tokenizer
        self.start_id, self.end_id = tok.token_to_id(self.start_tag), tok.token_to_id(self.end_tag)
        if self.start_id is None or self.end_id is None:
            raise ValueError(f"{self.name} reasoning parser could not locate think start/end tokens "
                             f"({self.start_tag}, {self.end_tag}) in the tokenizer!")
        self.calls_id = tok.token_to_id(CALLS_OPEN)  # (optional, as in vLLM)
        self.tags = (self.end_tag, CALLS_OPEN)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        for tid in reversed(token_ids):
            if tid == self.start_id:
                return False
            if tid == self.end_id or (self.calls_id is not None and tid == self.calls_id):
                return True
        return False

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        output = text.removeprefix(self.start_tag)
        # the first of the two tags ends the reasoning, neither and it is all reasoning, as streamed
        # (vLLM: a close tag after <ifm|tool_calls> wins, and neither makes it all content: README)
        at, tag = find_first(output, self.tags)
        if tag is None:
            return output, None
        if tag == self.end_tag:
            return output[:at], output[at + len(tag):] or None
        return output[:at], output[at:]

    # -- streaming --------------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        # p: phase; h: held text (a partial leading open tag, or a partial close / tool_calls tag).
        # The prompt is not read: the non-streaming answer never looks at it.
        return {"p": self.OPENING, "h": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if state["p"] == self.CONTENT:
            return "", text
        buf, state["h"] = state["h"] + text, ""
        if state["p"] == self.OPENING:
            if self.start_tag.startswith(buf) and len(buf) < len(self.start_tag):
                state["h"] = buf
                return "", ""
            state["p"] = self.REASONING
            buf = buf.removeprefix(self.start_tag)
        at, tag = find_first(buf, self.tags)
        if tag is not None:
            state["p"] = self.CONTENT
            # the close tag is dropped, `<ifm|tool_calls>` starts the content (the tool parser reads it)
            return buf[:at], buf[at + len(tag):] if tag == self.end_tag else buf[at:]
        keep = partial_suffix(buf, self.tags)
        state["h"] = buf[len(buf) - keep:]
        return buf[:len(buf) - keep], ""

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        return ("", held) if state["p"] == self.CONTENT else (held, "")


# -- one call's body ------------------------------------------------------------------------

class CallFailed(Exception):
    """A call vLLM's parser rejects (then the whole group is no call)."""


def _base_type(explicit: str | None) -> str | None:
    return explicit.split("[", 1)[0].strip().lower() if explicit else None


def _xml_value(value: str, schema: Any, explicit: str | None) -> Any:
    """vLLM's `_coerce_xml_value`: an explicit type narrows the schema's types (or is the type)."""
    base = _base_type(explicit)
    types = schema_types(schema)
    if isinstance(schema, dict):
        if base in types and len(types) > 1:
            types = {base}
    elif base == "any":
        return value
    elif base:
        types = {base}
    return coerce(value if "string" in types else value.strip(), types)


def _json_value(value: Any, schema: Any) -> Any:
    """vLLM's `_coerce_json_value`: a value with a property schema re-typed from its JSON text."""
    if not isinstance(schema, dict):
        return value
    if not isinstance(value, str):
        if not finite(value):
            raise CallFailed  # (json.dumps(..., allow_nan=False) raises)
        value = json.dumps(value, ensure_ascii=False)
    return coerce(value, schema_types(schema))


class K2HorizonToolParser(ToolParser):
    name = "k2_horizon"
    supports_required_and_named = False  # "required" / a named tool read the IFM markup too
    # vLLM marks it `engine_based_streaming`: without a reasoning parser (K2's own is classic) the
    # composition is vLLM's engine one, whose content is this parser's: None when blank, the output
    # as written under tool_choice "none"
    engine_based = True

    # phases (serialized as these letters)
    TEXT = "T"  # before the group
    GROUP = "G"  # in the group, between calls
    CALL = "K"  # in a call's body
    AFTER = "E"  # after a group whose calls went out: content
    PLAIN = "X"  # the group failed: the rest is content as written

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        # vLLM reads the request's own kwargs here, not the server's defaults
        fmt = ctx.request_chat_template_kwargs.get("tool_call_format", "xml")
        self.format = fmt if isinstance(fmt, str) and fmt in TOOL_CALL_FORMATS else None
        choice = ctx.tool_choice
        self.named = ((choice.get("function") or {}).get("name")
                      if isinstance(choice, dict) and isinstance(choice.get("function"), dict) else None)
        # tool_choice "none" (a request without tools has it too): the output is content as written
        self.passthrough = choice == "none" or (choice is None and not ctx.tools)

    def adjust_request(self, request: Any) -> Any:
        """vLLM's only adjustment: an unknown `tool_call_format` is refused (nothing is constrained)."""
        fmt = (getattr(request, "chat_template_kwargs", None) or {}).get("tool_call_format", "xml")
        if not isinstance(fmt, str) or fmt not in TOOL_CALL_FORMATS:
            raise bad_request(f"Unsupported tool_call_format {fmt!r}. Supported values: "
                              f"{', '.join(sorted(TOOL_CALL_FORMATS))}.")
        return request

    # -- one call -------------------------------------------------------------------------

    def _tool_name(self, name: Any) -> str:
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise CallFailed
        tools = self.ctx.tools
        if tools and not any((t.get("function") or {}).get("name") == name for t in tools if isinstance(t, dict)):
            raise CallFailed
        if self.named is not None and name != self.named:
            raise CallFailed
        return name

    def _json_call(self, body: str) -> tuple[str, dict[str, Any]]:
        try:
            raw = json.loads(body.strip())
        except ValueError as exc:
            raise CallFailed from exc
        if not isinstance(raw, dict):
            raise CallFailed
        name = self._tool_name(raw.get("name"))
        args = raw.get("arguments", {})
        if not isinstance(args, dict):
            raise CallFailed
        props = tool_properties(self.ctx.tools, name)
        return name, {key: _json_value(value, props.get(key)) for key, value in args.items()}

    def _xml_call(self, body: str) -> tuple[str, dict[str, Any]]:
        first = body.find(KEY_OPEN)
        if first == -1:
            if any(tag in body for tag in ARG_TAGS):
                raise CallFailed
            return self._tool_name(body.strip()), {}
        name = self._tool_name(body[:first].strip())
        props = tool_properties(self.ctx.tools, name)
        args: dict[str, Any] = {}
        pos = first
        for match in _ARG.finditer(body, first):
            if body[pos:match.start()].strip():
                raise CallFailed
            key = match.group(1).strip()
            if not key or key in args:
                raise CallFailed
            explicit = match.group(2).strip() if match.group(2) is not None else None
            if (self.format == "xml" and explicit is not None) or (self.format == "xml_typed" and not explicit):
                raise CallFailed
            args[key] = _xml_value(match.group(3), props.get(key), explicit)
            pos = match.end()
        if pos == first or body[pos:].strip():
            raise CallFailed
        return name, args

    def parse_call(self, body: str) -> dict[str, Any] | None:
        """A call's body as {id, name, arguments}, or None when vLLM's parser rejects it."""
        if self.format is None:
            return None  # (vLLM raises; the render side refuses such a request first)
        try:
            name, args = self._json_call(body) if self.format == "json" else self._xml_call(body)
            if not finite(args):
                return None
            return {"id": None, "name": name, "arguments": dumps(args)}
        except (CallFailed, RecursionError):  # (JSON nested too deep: vLLM's parser raises, a 500 there)
            return None

    # -- non-streaming: vLLM's rule, exactly ------------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        whole = text if text.strip() else None  # (the content without calls; the classic composition uses its own)
        start = text.find(CALLS_OPEN) if not self.passthrough else -1
        end = text.find(CALLS_CLOSE, start + len(CALLS_OPEN)) if start != -1 else -1
        if end == -1:
            return None, whole
        group = text[start + len(CALLS_OPEN):end]
        matches = list(_CALL.finditer(group))
        if not matches or _CALL.sub("", group).strip():
            return None, whole
        calls = [self.parse_call(m.group(1)) for m in matches]
        if any(call is None for call in calls):
            return None, whole
        content = text[:start] + text[end + len(CALLS_CLOSE):]
        return calls, content if content.strip() else None

    # -- streaming ----------------------------------------------------------------------------

    def start(self) -> State:
        # ph: phase; h: a partial tag held at the end; raw: the group's text while no call went
        # out (it is the content if the group fails); the current call's body is raw[po:] while
        # raw is kept (not held twice), else cb; n: calls sent
        return {"ph": self.PLAIN if self.passthrough else self.TEXT, "h": "", "raw": None, "po": 0, "cb": "", "n": 0}

    def _fail(self, state: State, part: str, out: list[str]) -> None:
        """The group failed: before any call went out its whole text is content (exact); after,
        the failing part (the rest follows as content)."""
        out.append(state["raw"] if state["raw"] is not None else part)
        state.update(ph=self.PLAIN, raw=None, po=0, cb="")

    @staticmethod
    def _body(state: State) -> str:
        return state["raw"][state["po"]:] if state["raw"] is not None else state["cb"]

    def _raw(self, state: State, text: str) -> None:
        if state["raw"] is not None:
            state["raw"] += text

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        if state["ph"] in (self.AFTER, self.PLAIN):
            return text, []
        buf, state["h"] = state["h"] + text, ""
        out: list[str] = []
        calls: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            if ph in (self.AFTER, self.PLAIN):
                out.append(buf[pos:])
                break
            if ph == self.TEXT:
                at = buf.find(CALLS_OPEN, pos)
                if at == -1:
                    end = len(buf) - partial_suffix(buf[pos:], (CALLS_OPEN,))
                    out.append(buf[pos:end])
                    state["h"] = buf[end:]
                    break
                out.append(buf[pos:at])
                pos = at + len(CALLS_OPEN)
                state.update(ph=self.GROUP, raw=CALLS_OPEN)
            elif ph == self.GROUP:
                blank = pos
                while blank < len(buf) and buf[blank].isspace():
                    blank += 1
                self._raw(state, buf[pos:blank])  # (whitespace between calls: dropped once a call went out)
                pos = blank
                rest = buf[pos:pos + len(CALLS_CLOSE)]
                if not rest:
                    break
                if rest.startswith(CALL_OPEN):
                    pos += len(CALL_OPEN)
                    self._raw(state, CALL_OPEN)
                    state.update(ph=self.CALL, cb="", po=len(state["raw"]) if state["raw"] is not None else 0)
                elif rest.startswith(CALLS_CLOSE):
                    pos += len(CALLS_CLOSE)
                    if state["n"]:
                        state.update(ph=self.AFTER, raw=None)
                    else:  # an empty group
                        self._raw(state, CALLS_CLOSE)
                        self._fail(state, CALLS_CLOSE, out)
                elif pos + len(rest) == len(buf) and (CALL_OPEN.startswith(rest) or CALLS_CLOSE.startswith(rest)):
                    state["h"] = rest  # a tag may still be coming
                    break
                else:  # other text in the group
                    self._fail(state, "", out)
            else:  # in a call
                at, tag = find_first(buf, (CALL_CLOSE, CALLS_CLOSE), pos)
                end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], (CALL_CLOSE, CALLS_CLOSE))
                if state["raw"] is not None:
                    state["raw"] += buf[pos:end]
                else:
                    state["cb"] += buf[pos:end]
                if tag is None:
                    state["h"] = buf[end:]
                    break
                pos = at + len(tag)
                body = self._body(state)
                self._raw(state, tag)
                call = self.parse_call(body) if tag == CALL_CLOSE else None
                if call is None:  # a failing call, or the group closed inside it
                    self._fail(state, CALL_OPEN + body + tag, out)
                    continue
                calls.append({"index": state["n"], "id": None, "type": "function",
                              "function": {"name": call["name"], "arguments": call["arguments"]}})
                state.update(ph=self.GROUP, n=state["n"] + 1, raw=None, po=0, cb="")
        return "".join(out), calls

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        ph = state["ph"]
        if ph in (self.GROUP, self.CALL):  # the group never closed: no calls in vLLM's answer
            if state["raw"] is not None:
                held = state["raw"] + held  # nothing went out: the whole output is content (exact)
            elif ph == self.CALL:
                held = CALL_OPEN + state["cb"] + held  # after a call went out: the failing part
            state.update(ph=self.PLAIN, raw=None, po=0, cb="")
        return held, []

    def tools_called(self, state: State) -> bool:
        # (in vLLM's engine composition a whitespace-only content is None even without a call)
        return state["n"] > 0 or self.ctx.engine_composition
