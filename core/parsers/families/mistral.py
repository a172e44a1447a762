"""mistral: `[THINK]` reasoning and `[TOOL_CALLS]` tool calls, for Hugging Face tokenizers.

vLLM 0.33's Mistral parser reads its format from the tokenizer's vocabulary:
* `[THINK]` in the vocabulary (v13+): reasoning is `[THINK]...[/THINK]`, which may start
  anywhere in the output (the parser starts in content); a repeated `[THINK]` inside reasoning
  and a stray `[/THINK]` after it are dropped; `[TOOL_CALLS]` ends reasoning; the reasoning is
  right-stripped. Without `[THINK]` there is no reasoning;
* `[ARGS]` in the vocabulary (v11+): `[TOOL_CALLS]NAME[ARGS]ARGS` or `[TOOL_CALLS]NAME{...}`;
  the next `[TOOL_CALLS]` starts the next call; the arguments are the first JSON value of the
  stripped raw text (anything after it is dropped), or the stripped raw text when that is not
  JSON; names are not checked; content is the text before the first call, stripped;
* otherwise (pre-v11): `[TOOL_CALLS]` then a JSON list of `{"name", "arguments"}` objects (or one
  object); string arguments are kept as they are, others are re-serialized; without a valid
  call the content is the JSON text after the marker; with "required" or a named tool a bare
  array without the marker is accepted.
Tool call ids are 9 random alphanumeric characters. (Mistral's own tokenizer mode, which uses
mistral-common and a grammar, is not supported by this project.)
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolCallDelta, ToolParser
from core.parsers.families.glm45 import Glm45ReasoningParser
from core.parsers.families.think import Action
from core.parsers.jsonstream import JsonScanner, new_state
from core.parsers.registry import register_reasoning, register_tool
from core.parsers.text import find_first, hold_trailing_space, merge_tool_deltas, partial_suffix

TOOL_CALLS, ARGS, THINK, THINK_END = "[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"
_ALNUM = string.ascii_letters + string.digits
_DECODER = json.JSONDecoder()
_LIST_RE = re.compile(r"\[{.*}\]", re.DOTALL)


def mistral_id() -> str:
    return "".join(random.choices(_ALNUM, k=9))


@register_reasoning("mistral")
class MistralReasoningParser(Glm45ReasoningParser):
    name = "mistral"
    MARKERS = (THINK, THINK_END, TOOL_CALLS, ARGS, "{")

    def __init__(self, ctx: ParserContext) -> None:
        tok = ctx.tokenizer
        self.enabled = tok.token_to_id(THINK) is not None
        self.drops_special_tokens = self.enabled  # without [THINK] vLLM runs no engine at all
        self.ctx = ctx
        self.start_id = tok.token_to_id(THINK)
        self.end_id = tok.token_to_id(THINK_END)
        self.thinking = self.enabled
        self.boundary_ids = frozenset()
        self._tables = self.tables()
        self._tags = {phase: tuple(table) for phase, table in self._tables.items()}
        calls = tok.token_to_id(TOOL_CALLS)
        self.reasoning_end_ids = frozenset(i for i in (self.end_id, calls) if i is not None)

    def tables(self) -> dict[str, dict[str, Action]]:
        return {"C": {THINK: ("R", False), THINK_END: (None, False)},
                "R": {THINK: (None, False), THINK_END: ("C", False), TOOL_CALLS: ("C", True)}, "P": {}}

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        return "C" if self.enabled else "P"  # the engine starts in content whatever the prompt

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        if not self.enabled:
            return True
        for tid in reversed(token_ids):
            if tid in self.reasoning_end_ids:
                return True
            if tid == self.start_id:
                return False
        return False

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if not self.enabled:
            return None, text
        return super().parse_complete(text, token_ids, prompt_token_ids)


def _pre_v11_calls(parsed: Any) -> list[dict[str, Any]]:
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return []
    calls = []
    for item in parsed:
        if not isinstance(item, dict) or not ("name" in item or "arguments" in item):
            continue
        name, args = item.get("name"), item.get("arguments")
        if args is None:
            args = "{}"
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append({"id": mistral_id(), "name": name if isinstance(name, str) else "", "arguments": args})
    return calls


@register_tool("mistral")
class MistralToolParser(ToolParser):
    name = "mistral"
    supports_required_and_named = False
    engine_based = True
    MARKERS = MistralReasoningParser.MARKERS

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        # one parser for both in vLLM: its engine (and the special-token drop) runs with [THINK] only
        self.drops_special_tokens = tok.token_to_id(THINK) is not None
        if tok.token_to_id(TOOL_CALLS) is None:
            raise ValueError("Mistral parser could not locate the tool call token in the tokenizer!")
        self.v11 = tok.token_to_id(ARGS) is not None
        self.drops = (THINK_END,) if ctx.reasoning_parser and tok.token_to_id(THINK) is not None else ()

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False
        choice = getattr(request, "tool_choice", None)
        named = None if isinstance(choice, str) or choice is None else (_dump(choice).get("function") or {}).get("name")
        tools = [_dump(t) for t in (getattr(request, "tools", None) or [])]
        response_format = getattr(request, "response_format", None)
        rf_type = getattr(response_format, "type", None) if response_format is not None else None
        if (tools and getattr(request, "structured_outputs", None) is None and (choice == "required" or named)
                and (response_format is None or rf_type in ("text", "json_object", "json_schema"))):
            functions = [t.get("function") or {} for t in tools]
            extra: dict[str, Any] = {}
            if named is not None:
                functions = [f for f in functions if f.get("name") == named]
                extra["maxItems"] = 1
            if functions:
                from core.protocol.common import StructuredOutputsParams

                request.structured_outputs = StructuredOutputsParams(json={
                    "type": "array", "minItems": 1, **extra, "items": {"type": "object", "anyOf": [
                        {"type": "object", "properties": {"name": {"type": "string", "enum": [f.get("name")]},
                                                          "arguments": f.get("parameters") or {"type": "object"}},
                         "required": ["name", "arguments"]} for f in functions]}})
                request.response_format = None
        return request

    def _forced(self) -> bool:
        return self.ctx.tool_choice == "required" or isinstance(self.ctx.tool_choice, dict)

    # -- non-streaming ---------------------------------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if self.v11:
            calls, content = super().extract_complete(text, token_ids)
            if calls:
                return calls, (content or "").strip() or None
            return None, content
        if self.ctx.tool_choice == "none" and self.ctx.tools:
            return None, text or None
        content = None
        if TOOL_CALLS in text:
            content, *segments = text.split(TOOL_CALLS)
            body = next((s.strip() for s in segments if s.strip()), "")
        elif self._forced():
            body = text.strip()
        else:
            return None, text or None
        try:
            parsed, _ = _DECODER.raw_decode(body)
        except ValueError:
            found = _LIST_RE.findall(body)
            try:
                parsed = json.loads(found[0]) if found else None
            except ValueError:
                parsed = None
        calls = _pre_v11_calls(parsed)
        if not calls:
            return None, body or None
        return calls, content if content and content.strip() else None

    # -- streaming --------------------------------------------------------------------------

    def start(self) -> State:
        # v11 ph: C content, N name, A arguments; pre-v11 ph: C, S skip to JSON, J in the JSON, E after
        return {"ph": "C", "h": "", "n": 0, "cw": "", "called": False, "nm": "", "as": False, "aw": "",
                "js": None, "c": None, "raw": None}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        if self.v11:
            self._feed_v11(state, text, content, out)
        elif self.ctx.tool_choice == "none" and self.ctx.tools:
            return text, []  # pre-v11 with tool_choice "none": the output is content as written
        else:
            self._feed_legacy(state, text, content, out)
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        held, state["h"] = state["h"], ""
        if self.v11:
            self._text_v11(state, held, content, out)
            if state["ph"] in ("N", "A"):
                self._end_call_v11(state, out)
            if not state["called"] and state["cw"]:
                content.append(state["cw"])
            state["cw"] = ""
        elif not (self.ctx.tool_choice == "none" and self.ctx.tools):
            if state.get("lw"):
                content.append(state["lw"])
                state["lw"] = ""
            if held and state["ph"] == "C":
                content.append(held)
            elif held:
                self._feed_legacy(state, held, content, out, final=True)
            self._finish_legacy(state, content, out)
        return "".join(content), merge_tool_deltas(out)

    # v11+ -------------------------------------------------------------------------------

    def _feed_v11(self, state: State, text: str, content: list[str], out: list[ToolCallDelta]) -> None:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            tags = {"C": (TOOL_CALLS,) + self.drops, "N": (ARGS, "{"), "A": (TOOL_CALLS,), "D": (TOOL_CALLS,)}[ph]
            at, tag = find_first(buf, tags, pos)
            end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], tags)
            self._text_v11(state, buf[pos:end], content, out)
            if tag is None:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            if tag in self.drops:
                continue
            if tag == TOOL_CALLS:
                if ph == "A":
                    self._end_call_v11(state, out)
                state.update(ph="N", nm="", called=True, cw="")
            else:  # [ARGS] or "{" ends the name
                name = state["nm"].strip()
                state.update(ph="A", called=True, cw="", **{"as": False}, aw="", js=new_state(1))
                out.append({"index": state["n"], "id": mistral_id(), "type": "function",
                            "function": {"name": name, "arguments": ""}})
                if tag == "{":
                    self._text_v11(state, "{", content, out)

    def _text_v11(self, state: State, text: str, content: list[str], out: list[ToolCallDelta]) -> None:
        if not text:
            return
        ph = state["ph"]
        if ph == "C":
            hold_trailing_space(state, text, content)
        elif ph == "N":
            state["nm"] += text
        elif ph == "A":
            js = state["js"]
            if not state["as"]:
                text = text.lstrip()
                if not text:
                    return
                state["as"] = True
            if js is not None and not js["err"]:
                if js["done"]:
                    return  # text after the first JSON value is dropped
                used = JsonScanner(js).feed(text)
                if js["done"]:
                    text = text[:used]
                elif js["err"]:
                    pass  # not JSON: the stripped raw text is the arguments
            text = state["aw"] + text
            body = text.rstrip()
            state["aw"] = text[len(body):]
            if body:
                out.append({"index": state["n"], "function": {"arguments": body}})

    def _end_call_v11(self, state: State, out: list[ToolCallDelta]) -> None:
        if state["ph"] == "N":  # a name never followed by arguments
            out.append({"index": state["n"], "id": mistral_id(), "type": "function",
                        "function": {"name": state["nm"].strip(), "arguments": "{}"}})
            state["called"] = True
        elif not state["as"]:
            out.append({"index": state["n"], "function": {"arguments": "{}"}})
        elif state["js"] is not None and not state["js"]["done"] and not state["js"]["err"]:
            JsonScanner(state["js"]).finish()  # a bare top-level number completes at the end
        state["n"] += 1
        state["ph"] = "D"

    # pre-v11 ------------------------------------------------------------------------------

    def _feed_legacy(self, state: State, text: str, content: list[str], out: list[ToolCallDelta],
                     final: bool = False) -> None:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""

        if state["ph"] == "C":
            first = None
            if not state.get("begun") and self._forced():
                if not buf.strip():
                    state["lw"] = state.get("lw", "") + buf  # leading blanks: a bare array would drop them
                    return
                state["begun"] = True  # the output's first visible character decides a bare array
                first = buf.lstrip()[:1]
                held, state["lw"] = state.get("lw", ""), ""
                if first not in ("[", "{"):
                    buf = held + buf
            if first in ("[", "{"):
                state["ph"] = "S"  # a guided bare array
            else:
                at = buf.find(TOOL_CALLS)
                if at == -1:
                    keep = partial_suffix(buf, (TOOL_CALLS,))
                    content.append(buf[:len(buf) - keep])
                    state["h"] = buf[len(buf) - keep:]
                    return
                content.append(buf[:at])
                buf = buf[at + len(TOOL_CALLS):]
                state["ph"] = "S"
        if not final:  # a marker split across feeds must not reach the JSON
            keep = partial_suffix(buf, (TOOL_CALLS,))
            if keep:
                state["h"] = buf[len(buf) - keep:]
                buf = buf[:len(buf) - keep]
        if state["ph"] == "S":
            stripped = buf.lstrip()
            while stripped.startswith(TOOL_CALLS):  # empty segments between markers count as none
                stripped = stripped[len(TOOL_CALLS):].lstrip()
            if not stripped:
                return
            state["ph"] = "J"
            state["raw"] = ""
            state["js"] = new_state(2 if stripped[0] == "[" else 1)
            buf = stripped
        if state["ph"] in ("J", "E"):
            cut = buf.find(TOOL_CALLS)
            piece = buf if cut == -1 else buf[:cut]
            if state["raw"] is not None and not state.get("segment_done"):
                state["raw"] += piece  # the JSON segment, kept until a call is sent (plain-content fallback)
            if cut != -1:
                state["segment_done"] = True
            if state["ph"] == "J":
                scanner = JsonScanner(state["js"])
                scanner.feed(piece)
                self._legacy_events(state, scanner.events, out)
                if state["js"]["done"] or state["js"]["err"] or cut != -1:
                    state["ph"] = "E"

    def _legacy_events(self, state: State, events: list[tuple], out: list[ToolCallDelta]) -> None:
        for ev in events:
            kind = ev[0]
            if state["c"] is None and kind in ("start", "frag") and ev[1] in ("name", "arguments"):
                state["c"] = {"nm": "", "hdr": False, "pa": "", "ak": False, "akind": None, "aend": False}
            call = state["c"]
            if call is None:
                continue
            if kind == "start" and ev[1] == "arguments":
                call["ak"] = True
            elif kind == "frag" and ev[1] == "name":
                call["nm"] += ev[2]
            elif kind == "frag" and ev[1] == "arguments":
                if call["akind"] is None:
                    call["akind"] = ev[2][:1]
                if call["hdr"] and call["akind"] in ("{", "["):
                    out.append({"index": state["n"], "function": {"arguments": ev[2]}})
                else:
                    call["pa"] += ev[2]
            elif kind == "end" and ev[1] == "name" and not call["hdr"]:
                try:
                    name = json.loads(call["nm"])
                except ValueError:
                    name = ""
                self._legacy_header(state, call, name if isinstance(name, str) else "", out)
            elif kind == "end" and ev[1] == "arguments":
                call["aend"] = True
                if call["hdr"] and call["akind"] not in ("{", "["):
                    out.append({"index": state["n"], "function": {"arguments": _scalar_args(call["pa"])}})
                    call["pa"] = ""
            elif kind == "obj":
                if not call["hdr"]:
                    self._legacy_header(state, call, "", out)
                if not call["ak"]:
                    out.append({"index": state["n"], "function": {"arguments": "{}"}})
                state["n"] += 1
                state["c"] = None

    def _legacy_header(self, state: State, call: dict[str, Any], name: str, out: list[ToolCallDelta]) -> None:
        call["hdr"] = True
        state["called"] = True
        state["raw"] = None
        if call["akind"] in ("{", "["):
            pending, call["pa"] = call["pa"], ""
        elif call["aend"]:
            pending, call["pa"] = _scalar_args(call["pa"]), ""
        else:
            pending = ""
        out.append({"index": state["n"], "id": mistral_id(), "type": "function",
                    "function": {"name": name, "arguments": pending}})

    def _finish_legacy(self, state: State, content: list[str], out: list[ToolCallDelta]) -> None:
        if state["ph"] in ("J", "E") and state["js"] is not None:
            scanner = JsonScanner(state["js"])
            scanner.finish()
            self._legacy_events(state, scanner.events, out)
        if not state["called"] and state["raw"] is not None:
            body = state["raw"].strip()
            if body:
                content.append(body)  # no call: vLLM returns the JSON text as content


def _scalar_args(frag: str) -> str:
    """A non-container "arguments" value: a string is kept as is, null is "{}", others as JSON."""
    try:
        value = json.loads(frag)
    except ValueError:
        return frag
    if value is None:
        return "{}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _dump(value: Any) -> Any:
    from pydantic import BaseModel

    return value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value

