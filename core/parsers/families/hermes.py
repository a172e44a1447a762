"""hermes / qwen3_json: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, and longcat
(the same with `<longcat_tool_call>` markers).

vLLM's non-streaming rule (`extract_complete`, exact): content is the text before the first
`<tool_call>`; every `<tool_call>(.*?)</tool_call>` (or an unclosed last one) must hold a JSON
object with "name" (a string) and "arguments", whose value is re-serialized with
`json.dumps(..., ensure_ascii=False)`; if any call fails, there are no calls and the whole text
is content. Text after a call is dropped.

Streaming (`feed`): content streams until the first `<tool_call>` (holding back only a partial
tag). Inside a call the body is read by the incremental JSON scanner, which re-serializes the
"arguments" value as it goes, so the fragments concatenate to exactly the non-streaming string.
The name delta goes out once the "name" string is complete. State: the phase, a partial-tag
tail, the scanner state and — only until the name is known — the raw call text, so that a call
that breaks before anything of it was sent can still fall back to plain content like vLLM does.
A call that breaks after its name was sent cannot be taken back (vLLM's stream has the same
limit); the rest of its body is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TypedDict

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.jsonstream import JsonScanner, dumps, escape_lone_surrogates, new_state
from core.parsers.structural_tag import TagModel, apply_structural_tag, keep_markers_for_tools
from core.parsers.text import partial_suffix

TOOL_START = "<tool_call>"
TOOL_END = "</tool_call>"
_WS = " \t\n\r"


class JsonCall(TypedDict):
    """One JSON call object being read (inside the parser state, so the keys are short)."""

    i: int  # the call's index
    js: dict[str, Any]  # the JSON scanner's state (core/parsers/jsonstream.py)
    nm: str  # the name's JSON text while it is read
    name: str | None  # the name, once read
    hdr: bool  # the name delta went out
    pa: str  # argument text waiting for the name
    ak: str | None  # which arguments key was seen
    bad: bool  # the object cannot be a call (a repeated key, a name that is no string, not JSON)


class JsonCallReader:
    """Streams one JSON call object `{"name": .., ARGS_KEY: ..}` through the scanner (shared by
    the JSON-object families); the call's progress is a `JsonCall` inside the parser state."""

    def __init__(self, args_keys: tuple[str, ...]) -> None:
        self.args_keys = args_keys

    @staticmethod
    def new_call(index: int) -> JsonCall:
        return {"i": index, "js": new_state(1), "nm": "", "name": None, "hdr": False, "pa": "",
                "ak": None, "bad": False}

    def feed(self, call: JsonCall, text: str, out: list[ToolCallDelta]) -> int:
        """Feed JSON text; append deltas to out; return characters used (stops when the object is done)."""
        scanner = JsonScanner(call["js"])
        used = scanner.feed(text)
        self._events(call, scanner.events, out)
        return used

    def finish_scalar(self, call: JsonCall, out: list[ToolCallDelta]) -> None:
        scanner = JsonScanner(call["js"])
        scanner.finish()
        self._events(call, scanner.events, out)

    def _events(self, call: JsonCall, events: list[tuple], out: list[ToolCallDelta]) -> None:
        for ev in events:
            kind = ev[0]
            if kind == "frag":
                key = ev[1]
                if key == "name":
                    call["nm"] += ev[2]
                elif key in self.args_keys and key == call["ak"]:
                    if call["hdr"]:
                        out.append({"index": call["i"], "function": {"arguments": ev[2]}})
                    else:
                        call["pa"] += ev[2]
            elif kind == "start":
                key = ev[1]
                if key in self.args_keys:
                    if call["ak"] is not None:  # a repeated args key: json.loads keeps the last one
                        call["bad"] = True
                    call["ak"] = key
                    call["pa"] = "" if not call["hdr"] else call["pa"]
                elif key == "name":
                    if call["name"] is not None:
                        call["bad"] = True
                    call["nm"] = ""
            elif kind == "end" and ev[1] == "name":
                try:
                    name = json.loads(call["nm"])
                except ValueError:
                    name = None
                if not isinstance(name, str):
                    call["bad"] = True
                    continue
                call["name"] = name = escape_lone_surrogates(name)
                if not call["hdr"] and not call["bad"]:
                    call["hdr"] = True
                    out.append({"index": call["i"], "id": None, "type": "function",
                                "function": {"name": name, "arguments": call["pa"]}})
                    call["pa"] = ""
            elif kind == "error":
                call["bad"] = True

    @staticmethod
    def complete(call: JsonCall) -> bool:
        """The object was read completely and has a string name and an args value."""
        js = call["js"]
        return bool(js["done"] and not js["err"] and not call["bad"] and call["name"] is not None
                    and call["ak"] is not None and call["hdr"])


def hermes_tag_model(start: str, end: str) -> TagModel:
    """vLLM's hermes-style structural tag: both envelopes (with and without the newlines)."""
    return TagModel([(start + '\n{"name": "{name}", "arguments": ', "}\n" + end),
                     (start + '{"name": "{name}", "arguments": ', "}" + end)], [start])


def hermes_call_re(start: str, end: str) -> re.Pattern[str]:
    """vLLM's call regex: closed calls, or an unclosed last one."""
    return re.compile(f"{re.escape(start)}(.*?){re.escape(end)}|{re.escape(start)}(.*)", re.DOTALL)


class HermesToolParser(ToolParser):
    name = "hermes"
    # vLLM constrains required/named calls with its structural tag, then parses them as "auto"
    supports_required_and_named = False
    # the call markers (a variant family, e.g. longcat, only changes these three)
    START, END = TOOL_START, TOOL_END
    CALL_RE = hermes_call_re(START, END)
    TAG_MODEL = hermes_tag_model(START, END)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.reader = JsonCallReader(("arguments",))

    def adjust_request(self, request: Any) -> Any:
        request = apply_structural_tag(request, self.TAG_MODEL)
        return keep_markers_for_tools(request)

    # -- non-streaming: vLLM's rule, exactly ---------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if self.START not in text:
            return None, text
        try:
            calls = []
            for closed, unclosed in self.CALL_RE.findall(text):
                obj = json.loads(closed if closed else unclosed)
                name = obj["name"]
                if not isinstance(name, str):
                    raise TypeError("name")
                calls.append({"id": None, "name": escape_lone_surrogates(name), "arguments": dumps(obj["arguments"])})
        except Exception:  # noqa: BLE001 - vLLM falls back to plain content on any failure
            return None, text
        content = text[: text.find(self.START)]
        return calls, content or None

    # -- streaming --------------------------------------------------------------------------

    # phases (serialized as these letters)
    TEXT = "T"  # content before any call
    CALL = "I"  # inside a call
    AFTER = "B"  # after a call (text outside calls is dropped)
    PLAIN = "X"  # the first call broke before anything of it went out: all content, as vLLM

    def start(self) -> State:
        # h: a partial tag held back; n: calls opened; c: the call being read (JsonCall);
        # raw: the first call's text, kept until its name goes out (for the plain fallback)
        return {"ph": self.TEXT, "h": "", "n": 0, "c": None, "raw": None}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        if not state["h"] and state["ph"] in (self.TEXT, self.PLAIN) and "<" not in text:
            return text, []  # fast path: plain content
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        content: list[str] = []
        out: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            if ph == self.PLAIN:
                content.append(buf[pos:])
                pos = len(buf)
            elif ph in (self.TEXT, self.AFTER):
                at = buf.find(self.START, pos)
                if at == -1:
                    keep = partial_suffix(buf[pos:], (self.START,))
                    if ph == self.TEXT:
                        content.append(buf[pos:len(buf) - keep])
                    state["h"] = buf[len(buf) - keep:]
                    pos = len(buf)
                else:
                    if ph == self.TEXT:
                        content.append(buf[pos:at])
                    pos = at + len(self.START)
                    self._open_call(state)
            else:  # inside a call: only </tool_call> ends it
                at = buf.find(self.END, pos)
                end = at if at != -1 else len(buf) - partial_suffix(buf[pos:], (self.END,))
                self._call_text(state, buf[pos:end], out, content)
                if at == -1:
                    state["h"] = buf[end:]
                    pos = len(buf)
                else:
                    pos = at + len(self.END)
                    if state["ph"] == self.CALL:
                        self._close_call(state, out, content, closed=True)
                    elif state["ph"] == self.PLAIN:  # the call fell back just now: its end tag too
                        content.append(self.END)
        return "".join(content), out

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        content: list[str] = []
        out: list[ToolCallDelta] = []
        if state["ph"] in (self.TEXT, self.PLAIN):
            content.append(held)
        elif state["ph"] == self.CALL:
            self._call_text(state, held, out, content)
            if state["ph"] == self.CALL:
                self._close_call(state, out, content, closed=False)
        return "".join(content), out

    # -- call handling ----------------------------------------------------------------------

    def _open_call(self, state: State) -> None:
        state["ph"] = self.CALL
        state["c"] = self.reader.new_call(state["n"])
        state["n"] += 1
        # raw text is kept only until the name is sent, for the plain-content fallback
        state["raw"] = self.START if state["n"] == 1 else None

    def _call_text(self, state: State, text: str, out: list[ToolCallDelta], content: list[str]) -> None:
        call = state["c"]
        if not text or call is None:
            return
        if state["raw"] is not None:
            state["raw"] += text
        js = call["js"]
        if js["done"] or js["err"] or call["bad"]:
            if text.strip(_WS):
                call["bad"] = True
        else:
            used = self.reader.feed(call, text, out)
            if used < len(text) and text[used:].strip(_WS):
                call["bad"] = True
        if call["hdr"]:
            state["raw"] = None
        elif call["bad"] and state["raw"] is not None:
            self._fall_back(state, content)

    def _fall_back(self, state: State, content: list[str]) -> None:
        """The first call broke before anything of it was sent: like vLLM, it is all content."""
        content.append(state["raw"])
        state["raw"] = None
        state["c"] = None
        state["ph"] = self.PLAIN

    def _close_call(self, state: State, out: list[ToolCallDelta], content: list[str], closed: bool) -> None:
        call = state["c"]
        if call is not None and not call["js"]["done"]:
            self.reader.finish_scalar(call, out)
        if call is not None and not self.reader.complete(call) and state["raw"] is not None:
            if closed:
                state["raw"] += self.END
            self._fall_back(state, content)
            return
        state["c"] = None
        state["raw"] = None
        state["ph"] = self.AFTER


class LongcatToolParser(HermesToolParser):
    """longcat (meituan-longcat/LongCat-Flash-*): hermes with `<longcat_tool_call>` markers,
    vLLM 0.33's LongcatFlashToolParser (a Hermes2ProToolParser subclass, its own structural tag
    with the same two envelopes)."""

    name = "longcat"
    START, END = "<longcat_tool_call>", "</longcat_tool_call>"
    CALL_RE = hermes_call_re(START, END)
    TAG_MODEL = hermes_tag_model(START, END)
