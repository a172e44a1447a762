"""kimi_k3: vLLM 0.33's Kimi K3 (XTML) reasoning and tool parsers.

K3 writes its channels as elements made of three special tokens `<|open|>`, `<|close|>`,
`<|sep|>` around a plain-text tag name:

    <|open|>think<|sep|>...<|close|>think<|sep|>
    <|open|>response<|sep|>Hi<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>
      <|open|>argument key="x" type="string"<|sep|>raw<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>

vLLM's rules (vllm/reasoning/kimi_k3_reasoning_parser.py, vllm/tool_parsers/
kimi_k3_tool_parser.py, vllm/parser/kimi_k3.py), where they do not look ahead:

* reasoning: from the start (the template may put the think open in the prompt) up to the first
  think close, the first think open before it dropped (with whitespace before it); an output
  whose first marker is a response open (only whitespace before it) has no reasoning; no close
  means all reasoning. `thinking` (else `enable_thinking`, default on) false in
  chat_template_kwargs: no reasoning.
* content after reasoning: kept raw when the K3 tool parser follows (it reads the channels), else
  unwrapped: the text before the first response channel (stray response closes and message closes
  removed; dropped when only whitespace), then the channel's body (or all after an unclosed open,
  message closes removed).
* tools: the first section after a tools open up to its close; each
  `<|open|>call ATTRS<|sep|>BODY<|close|>call<|sep|>` with a `tool="..."` attribute is a call
  (attribute values un-escaped `&quot;` then `&amp;`); each argument of the body is the raw text
  for `type="string"` (the default), else its JSON (the raw text when it is not JSON), and the
  arguments are `json.dumps(.., ensure_ascii=False)`. Content is the text before the section and
  the first response channel's body (before or after the section; a body ends at a tools open; a
  message close in it stays when the channel closes). The parser runs under tool_choice "none" too
  (calls dropped, content unwrapped): `engine_based` here means that. Forced calls (required /
  named) are the same XTML, not JSON.
* markers tolerate whitespace around the tag name (`<|open|> think <|sep|>`); one longer than
  HEAD_CAP is text.

One lexer splits text into plain text and marker "heads" (`<|open|>`/`<|close|>` up to the next
`<|sep|>`), holding back only an unfinished head (at most HEAD_CAP characters), and small channel
machines act on the heads; a call's body is buffered until its close and the call goes out whole
(as vLLM's stream). The non-streaming answer is the same machines over the whole output, so any
chunking streams it. Where vLLM's non-streaming rule looks ahead (text before a later response
channel or think open, a think close before the open, a response channel after the tools...) ours
is what vLLM's own stream sends: core/parsers/README.md, "vLLM 0.33 bugs we do not follow".
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, ReasoningParser, State, ToolCallDelta, ToolParser
from core.parsers.structural_tag import TagModel, _json_content, apply_tag_keeping_markers
from core.parsers.text import partial_suffix

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
_O, _C, _S = re.escape(OPEN), re.escape(CLOSE), re.escape(SEP)
HEAD_CAP = 1024  # an unfinished marker head longer than this is released as text (bounded state)


def _marker(start: str, name: str) -> re.Pattern[str]:
    return re.compile(start + r"\s*" + name + r"\s*" + _S)


THINK_OPEN, THINK_CLOSE = _marker(_O, "think"), _marker(_C, "think")
RESP_OPEN, RESP_CLOSE = _marker(_O, "response"), _marker(_C, "response")
MSG_CLOSE = _marker(_C, "message")
TOOLS_OPEN, TOOLS_CLOSE = _marker(_O, "tools"), _marker(_C, "tools")
CALL_CLOSE = _marker(_C, "call")
_UNTIL_SEP = r"(?:(?!" + _S + r").)*?"
CALL_OPEN = re.compile(_O + r"\s*call\s+(?P<attrs>" + _UNTIL_SEP + r")" + _S, re.DOTALL)
_CALL = re.compile(CALL_OPEN.pattern + r"(?P<body>.*?)" + CALL_CLOSE.pattern, re.DOTALL)
_ARG = re.compile(_O + r"\s*argument\s+(?P<attrs>" + _UNTIL_SEP + r")" + _S + r"(?P<val>.*?)" + _C
                  + r"\s*argument\s*" + _S, re.DOTALL)
_ATTR = re.compile(r'(?P<k>\w+)="(?P<v>[^"]*)"')


def thinking_enabled(kwargs: dict[str, Any]) -> bool:
    """vLLM's K3 switch: `thinking` if given (not None), else `enable_thinking`, default on."""
    thinking = kwargs.get("thinking")
    return bool(kwargs.get("enable_thinking", True) if thinking is None else thinking)


def preserves_tool_channels(ctx: ParserContext) -> bool:
    """The reasoning parser leaves the channels raw for the tool parser (tools, choice not none)."""
    return bool(ctx.tools) and ctx.tool_choice != "none"


# -- calls --------------------------------------------------------------------------------

def attrs(text: str) -> dict[str, str]:
    return {m["k"]: m["v"].replace("&quot;", '"').replace("&amp;", "&") for m in _ATTR.finditer(text)}


def decode_call(head_attrs: str, body: str) -> dict[str, Any] | None:
    """One call block as {"id", "name", "arguments"}; None without a tool name (dropped)."""
    arguments: dict[str, Any] = {}
    for arg in _ARG.finditer(body):
        a = attrs(arg["attrs"])
        raw = arg["val"]
        if a.get("type", "string") == "string":
            arguments[a.get("key", "")] = raw
        else:
            try:
                arguments[a.get("key", "")] = json.loads(raw)
            except ValueError:  # not JSON (or a partial value): the raw text, as vLLM
                arguments[a.get("key", "")] = raw
    name = attrs(head_attrs).get("tool", "")
    if not name:
        return None
    return {"id": None, "name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}


# -- the channel machines (streaming and not) ----------------------------------------------

def lex(state: State, text: str, final: bool) -> list[tuple[bool, str]]:
    """Split held + new text into (is_head, text) pieces; keep an unfinished head in state["h"].

    A head runs from the last `<|open|>`/`<|close|>` before a `<|sep|>` to that sep, as the
    markers' regexes match; pieces concatenate to the input. A head longer than HEAD_CAP is text,
    however the text came in (the state stays bounded, and every chunking reads it alike).
    """
    buf = state["h"] + text
    out: list[tuple[bool, str]] = []
    pos = 0
    while True:
        i, start = _next_start(buf, pos)
        if start is None:
            keep = 0 if final else partial_suffix(buf[pos:], (OPEN, CLOSE))
            _text(out, buf[pos:len(buf) - keep])
            state["h"] = buf[len(buf) - keep:]
            return out
        _text(out, buf[pos:i])
        sep = buf.find(SEP, i)
        nxt, _ = _next_start(buf, i + len(start))
        if nxt != -1 and (sep == -1 or nxt < sep):
            _text(out, buf[i:nxt])  # a start with no sep before the next start is text
            pos = nxt
        elif sep != -1 and sep + len(SEP) - i <= HEAD_CAP:
            out.append((True, buf[i:sep + len(SEP)]))
            pos = sep + len(SEP)
        elif final or len(buf) - i > HEAD_CAP:
            _text(out, start)  # never closed (or too long to be a marker): the start is text
            pos = i + len(start)
        else:
            state["h"] = buf[i:]
            return out


def _next_start(buf: str, pos: int) -> tuple[int, str | None]:
    i, j = buf.find(OPEN, pos), buf.find(CLOSE, pos)
    if i == -1 and j == -1:
        return -1, None
    if j == -1 or (i != -1 and i < j):
        return i, OPEN
    return j, CLOSE


def _text(out: list[tuple[bool, str]], text: str) -> None:
    if text:
        out.append((False, text))


class Channels:
    """The content machine: unwraps the response channel and, with `tools`, reads the section.

    Phases: P before any response open (whitespace held: a later open drops it), I inside the
    response, A after its close (dropped), T inside the tools section, K inside a call (body
    buffered), D after the section (dropped, but for the first response channel, as vLLM's stream
    sends it). "rs": a response channel was opened; "ts": the tools section was (only the first
    one is read).
    """

    def __init__(self, tools: bool, emit_calls: bool = True) -> None:
        self.tools = tools
        self.emit_calls = emit_calls

    @staticmethod
    def start() -> State:
        return {"h": "", "ph": "P", "ws": "", "at": "", "body": "", "n": 0, "rs": False, "ts": False, "mh": None}

    def feed(self, st: State, text: str, final: bool, calls: list[ToolCallDelta]) -> str:
        out: list[str] = []
        for head, piece in lex(st, text, final):
            self._piece(st, head, piece, out, calls)
        if final and st["mh"] is not None:  # the response never closed: vLLM drops its message closes
            out.append(MSG_CLOSE.sub("", st["mh"]))
            st["mh"] = None
        if final and st["ph"] == "P" and st["ws"]:
            out.append(st["ws"])
            st["ws"] = ""
        return "".join(out)

    def _piece(self, st: State, head: bool, piece: str, out: list[str], calls: list[ToolCallDelta]) -> None:
        ph = st["ph"]
        if ph == "K":
            if head and CALL_CLOSE.fullmatch(piece):
                call = decode_call(st["at"], st["body"])
                st["ph"], st["at"], st["body"] = "T", "", ""
                if call is not None and self.emit_calls:
                    calls.append({"index": st["n"], "id": None, "type": "function",
                                  "function": {"name": call["name"], "arguments": call["arguments"]}})
                    st["n"] += 1
            elif head and TOOLS_CLOSE.fullmatch(piece):
                st["ph"], st["at"], st["body"] = "D", "", ""  # the section ends: the open call is lost
            else:
                st["body"] += piece
            return
        if ph in ("A", "D"):
            if ph == "A" and head and self.tools and not st["ts"] and TOOLS_OPEN.fullmatch(piece):
                st["ph"], st["ts"] = "T", True
            elif ph == "D" and head and not st["rs"] and RESP_OPEN.fullmatch(piece):
                st["ph"], st["rs"] = "I", True  # a response channel after the tools: its body is content
            return
        if ph == "T":
            if not head:
                # a start the lexer released as text may still open a call whose attributes
                # hold another start (vLLM's regex reads from the first `<|open|>`): keep it
                pend = st["at"] + piece if st["at"] or piece.startswith(OPEN) else ""
                st["at"] = pend if len(pend) <= HEAD_CAP else ""
                return
            m = CALL_OPEN.search(st["at"] + piece)
            st["at"] = ""
            if m is not None and m.end() == len(m.string):
                st["ph"], st["at"] = "K", m["attrs"]
            elif TOOLS_CLOSE.fullmatch(piece):
                st["ph"] = "D"
            return
        if self.tools and ph == "I" and self._message_close(st, head, piece, out):
            return
        if head and MSG_CLOSE.fullmatch(piece):
            return
        if head and self.tools and TOOLS_OPEN.fullmatch(piece):
            if st["ts"]:  # a second section, in a response after the first: the content ends
                st["ph"] = "D"
                return
            if ph == "P":  # the text before the section is content, whitespace too
                out.append(st["ws"] or "")
            st["ph"], st["ws"], st["ts"] = "T", None, True
            return
        if ph == "P":
            if head and RESP_OPEN.fullmatch(piece):
                st["ph"], st["ws"], st["rs"] = "I", "", True
            elif head and RESP_CLOSE.fullmatch(piece):
                pass  # a stray close (the open was the generation prefix) is removed
            elif st["ws"] is not None and not piece.strip():
                st["ws"] += piece
            else:
                out.append((st["ws"] or "") + piece)
                st["ws"] = None
            return
        if head and RESP_CLOSE.fullmatch(piece):  # ph == "I"
            st["ph"] = "A"
            return
        out.append(piece)

    @staticmethod
    def _message_close(st: State, head: bool, piece: str, out: list[str]) -> bool:
        """A message close inside a response channel (the tool parser's raw text): vLLM keeps it when
        the channel closes (it takes the body whole), drops it when the channel never does. Held
        with what follows (up to HEAD_CAP characters, then kept) until a response close, a tools
        open or the end decides. True when `piece` was taken."""
        if st["mh"] is None:
            if head and MSG_CLOSE.fullmatch(piece):
                st["mh"] = piece
                return True
            return False
        if head and RESP_CLOSE.fullmatch(piece):
            out.append(st["mh"])
        elif head and TOOLS_OPEN.fullmatch(piece):
            out.append(MSG_CLOSE.sub("", st["mh"]))
        else:
            st["mh"] += piece
            if len(st["mh"]) > HEAD_CAP:
                out.append(st["mh"])
                st["mh"] = None
            return True
        st["mh"] = None
        return False  # (the close or the open then acts as usual)


class KimiK3ReasoningParser(ReasoningParser):
    """The think channel; the rest as content (unwrapped unless the tool parser reads it)."""

    name = "kimi_k3"
    engine_based = True  # composed with the K3 tool parser as one parser (vLLM's KimiK3Parser)

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        self.thinking = thinking_enabled(ctx.chat_template_kwargs)
        # the K3 tool parser after it reads the channels itself, as in vLLM's stream (its answer
        # unwraps here first when there are no tools, then reads the unwrapped text again)
        self.raw = preserves_tool_channels(ctx) or ctx.tool_call_parser == "kimi_k3"
        self.channels = Channels(tools=False)
        self.close_ids = tok.encode("<|close|>think<|sep|>")
        self.open_ids = tok.encode("<|open|>think<|sep|>")

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False  # the markers must reach the parser as text
        if hasattr(request, "spaces_between_special_tokens"):
            request.spaces_between_special_tokens = False
        return request

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """The newest think marker in the ids is a close (thinking off: always ended)."""
        if not self.thinking:
            return True
        close, open_ = self.close_ids, self.open_ids
        ids = list(token_ids)
        for i in range(len(ids) - min(len(close), len(open_)), -1, -1):
            if close and ids[i:i + len(close)] == close:
                return True
            if open_ and ids[i:i + len(open_)] == open_:
                return False
        return False

    # streaming: R (reasoning) then C (content through the channel machine, or raw); "lw" the
    # leading whitespace, held until what follows decides (a think open or a response open drops it)
    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"h": "", "ph": "R" if self.thinking else "C", "op": False, "sent": False, "lw": "",
                "c": self.channels.start()}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        return self._step(state, text, final=False)

    def finish(self, state: State) -> tuple[str, str]:
        return self._step(state, "", final=True)

    def _step(self, state: State, text: str, final: bool) -> tuple[str, str]:
        if state["ph"] == "C":
            held, state["h"] = state["h"], ""  # an unfinished head left by the reasoning phase
            return "", self._after(state, held + text, final)
        reasoning: list[str] = []
        rest: list[str] = []
        for head, piece in lex(state, text, final):
            if state["ph"] == "C":
                rest.append(piece)
            elif head and THINK_CLOSE.fullmatch(piece):
                reasoning.append(state["lw"])
                state["ph"], state["lw"] = "C", ""
            elif head and not state["op"] and THINK_OPEN.fullmatch(piece):
                state["op"], state["lw"] = True, ""  # (what came before the open is not reasoning)
            elif head and not state["op"] and not state["sent"] and RESP_OPEN.fullmatch(piece):
                state["ph"] = "C"  # a response with no think channel: all content
                rest.append(state["lw"] + piece)
                state["lw"] = ""
            elif not head and not state["sent"] and not piece.strip() and len(state["lw"] + piece) <= HEAD_CAP:
                state["lw"] += piece
            else:
                reasoning.append(state["lw"] + piece)
                state["sent"], state["lw"] = True, ""
        if final and state["ph"] == "R":
            reasoning.append(state["lw"])
            state["lw"] = ""
        content = self._after(state, "".join(rest), final) if state["ph"] == "C" else ""
        return "".join(reasoning), content

    def _after(self, state: State, text: str, final: bool) -> str:
        if self.raw:
            return text
        return self.channels.feed(state["c"], text, final, [])


# -- render side: vLLM's own "kimi_k3" structural tag (vllm/tool_parsers/structural_tag_registry.py)

_XTML_TYPES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null",
               "object": "object", "array": "array"}
_CALL_CLOSE, _ARG_CLOSE = f"{CLOSE}call{SEP}", f"{CLOSE}argument{SEP}"


def _esc(value: str) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;")


def _any_text(excludes: list[str]) -> dict[str, Any]:
    return {"type": "any_text", "excludes": excludes, "max_tokens": None, "max_chars": None}


def _loose_argument() -> dict[str, Any]:
    """Any attributes, a raw value: for untyped / union properties and tools without a schema."""
    return {"type": "tag", "begin": f"{OPEN}argument ", "content": {"type": "sequence", "elements": [
        {"type": "regex", "pattern": r"[^<]*<\|sep\|>"}, _any_text([CLOSE])]}, "end": _ARG_CLOSE}


def _argument(key: str, prop: Any, defs: dict[str, Any]) -> dict[str, Any]:
    prop = prop if isinstance(prop, dict) else {}
    kind = _XTML_TYPES.get(prop["type"]) if isinstance(prop.get("type"), str) else None
    if kind is None:
        return _loose_argument()
    begin = f'{OPEN}argument key="{_esc(key)}" type="{kind}"{SEP}'
    if kind != "string":  # JSON values follow the property's schema (with the root's $defs)
        content = _json_content({**prop, **{k: v for k, v in defs.items() if k not in prop}})
        return {"type": "tag", "begin": begin, "content": content, "end": _ARG_CLOSE}
    enum = prop.get("enum")
    if enum is None and isinstance(prop.get("const"), str):
        enum = [prop["const"]]
    max_len, min_len = prop.get("maxLength"), prop.get("minLength", 0)
    if (isinstance(enum, list) and enum and len(enum) <= 256 and all(isinstance(v, str) for v in enum)
            and not any("<|" in v for v in enum)):
        options = [{"type": "const_string", "value": v} for v in enum]
        content = options[0] if len(options) == 1 else {"type": "or", "elements": options}
    elif isinstance(max_len, int) and not isinstance(max_len, bool) and 0 <= max_len <= 4096:
        if not isinstance(min_len, int) or min_len < 0 or min_len > max_len:
            min_len = 0
        content = {"type": "regex", "pattern": f"(?:[^<]|<[^|]){{{min_len},{max_len}}}"}
    else:
        content = _any_text([CLOSE])
    return {"type": "tag", "begin": begin, "content": content, "end": _ARG_CLOSE}


def _arguments(params: Any) -> dict[str, Any]:
    props = params.get("properties") if isinstance(params, dict) else None
    if not isinstance(props, dict) or not props:
        return {"type": "star", "content": _loose_argument()}
    defs = {k: params[k] for k in ("$defs", "definitions") if isinstance(params.get(k), dict)}
    tags = [_argument(key, prop, defs) for key, prop in props.items()]
    inner = tags[0] if len(tags) == 1 else {"type": "or", "elements": tags}
    required = params.get("required")
    return {"type": "plus" if isinstance(required, list) and required else "star", "content": inner}


class KimiK3TagModel(TagModel):
    """The response channel, then the tools channel (optional for "auto", one tool when named),
    then the optional message close; a strict tool's arguments typed by its schema."""

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        calls = []
        for function in (tools[:1] if named else tools):
            strict = function.get("strict") is True and function.get("parameters") is not None
            calls.append({"type": "tag", "begin": f'{OPEN}call tool="{_esc(function.get("name", ""))}" index="',
                          "content": {"type": "sequence", "elements": [
                              {"type": "regex", "pattern": "[0-9]+"}, {"type": "const_string", "value": f'"{SEP}'},
                              _arguments(function.get("parameters") if strict else True)]},
                          "end": _CALL_CLOSE})
        channel = {"type": "tag", "begin": f"{OPEN}tools{SEP}", "content": {
            "type": "tags_with_separator", "tags": calls, "separator": "", "at_least_one": True,
            "stop_after_first": False}, "end": f"{CLOSE}tools{SEP}"}
        return {"type": "sequence", "elements": [
            {"type": "optional", "content": {"type": "const_string", "value": f"{OPEN}response{SEP}"}},
            {"type": "tag", "begin": "", "content": _any_text([OPEN, CLOSE, "<|end_of_msg|>"]),
             "end": f"{CLOSE}response{SEP}"},
            channel if required or named else {"type": "optional", "content": channel},
            {"type": "optional", "content": {"type": "const_string", "value": f"{CLOSE}message{SEP}"}}]}


class KimiK3ToolParser(ToolParser):
    """The tools channel: whole calls once their block closes; content unwrapped."""

    name = "kimi_k3"
    supports_required_and_named = False  # forced calls are XTML too (vLLM's structural tag)
    engine_based = True  # runs under tool_choice "none" (content unwrapped, calls dropped)
    forced_blank_dropped = False  # vLLM's KimiK3Parser keeps whitespace-only content under a forced choice
    TAG_MODEL = KimiK3TagModel([], [], named_single_call=False)

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        # under tool_choice "none" (or without tools) the calls are dropped; not emitting them
        # keeps whitespace-only content, as vLLM's answer there (no "tools were called" rule)
        self.channels = Channels(tools=True, emit_calls=preserves_tool_channels(ctx))

    def adjust_request(self, request: Any) -> Any:
        request = apply_tag_keeping_markers(request, self.TAG_MODEL)
        if hasattr(request, "spaces_between_special_tokens"):
            request.spaces_between_special_tokens = False
        return request

    def start(self) -> State:
        return self.channels.start()

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        calls: list[ToolCallDelta] = []
        return self.channels.feed(state, text, False, calls), calls

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        calls: list[ToolCallDelta] = []
        return self.channels.feed(state, "", True, calls), calls
