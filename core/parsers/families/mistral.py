"""mistral: `[THINK]` reasoning and `[TOOL_CALLS]` tool calls, for Hugging Face tokenizers.

vLLM 0.33's Mistral parser reads its format from the tokenizer's vocabulary:
* `[THINK]` in the vocabulary (v13+): the parser engine (vllm/parser/mistral.py, `mistral_config`
  with special-token reasoning) does reasoning and tool calls: reasoning is `[THINK]...[/THINK]`
  anywhere in the output (the parser starts in content), `[TOOL_CALLS]` ends it, it is
  right-stripped. Without `[THINK]`, a tokenizer with mistral-common's grammar (Mistral's own,
  `--tokenizer-mode mistral`, Tekken v11+) has the same rules over plain-text `<think>` /
  `</think>` (no token ids: reasoning never ends by an id); otherwise there is no reasoning;
* `[ARGS]` in the vocabulary (v11+): the same engine reads `[TOOL_CALLS]NAME[ARGS]ARGS` or
  `[TOOL_CALLS]NAME{...}`; the next `[TOOL_CALLS]` starts the next call; the arguments are the
  first JSON value of the stripped raw text (anything after it is dropped), or the stripped raw
  text when that is not JSON, with the tool schema's types applied; names are not checked (an
  empty one included); content is the text before the first call, stripped;
* otherwise (pre-v11, vLLM's legacy path, no engine): `[TOOL_CALLS]` then a JSON list of
  `{"name", "arguments"}` objects (or one object); string arguments are kept as they are, others
  are re-serialized (vLLM also reads a `[{...}]` found after other text: here only when the
  output is held whole, "required" or a named tool; otherwise the stream sent that text); without
  a valid call the content is the JSON text after the marker; with "required" or a named tool a
  bare array without the marker is accepted.
Tool call ids are 9 random alphanumeric characters. In `--tokenizer-mode mistral`
(core/renderers/mistral.py) the same rules read the text of Mistral's own decoding; from Tekken v11
both parsers' adjust_request take vLLM's grammar path there (`apply_grammar`).
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolCallDelta
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import (CallState, EngineReasoningParser, EngineToolParser, JsonArgStreamer)
from core.parsers.jsonstream import JsonScanner, dumps, escape_lone_surrogates, new_state
from core.parsers.text import merge_tool_deltas, partial_suffix

TOOL_CALLS, ARGS, THINK, THINK_END = "[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"
_ALNUM = string.ascii_letters + string.digits
_DECODER = json.JSONDecoder()
_LIST_RE = re.compile(r"\[{.*}\]", re.DOTALL)

C, R, N, A = Phase.CONTENT, Phase.REASONING, Phase.NAME, Phase.ARGS


def mistral_id() -> str:
    return "".join(random.choices(_ALNUM, k=9))


def mistral_grammar(reasoning: bool, start: str = THINK, end: str = THINK_END) -> Grammar:
    think = {"THINK_START": start, "THINK_END": end} if reasoning else {}
    think_transitions = {(C, "THINK_START"): (R, ()), (R, "THINK_START"): (R, ()),
                         (R, "THINK_END"): (C, (Ev.REASONING_END,)), (C, "THINK_END"): (C, ()),
                         (R, "TOOL_CALLS"): (N, (Ev.REASONING_END, Ev.CALL_START))} if reasoning else {}
    start = (Ev.REASONING_END, Ev.CALL_START) if reasoning else (Ev.CALL_START,)
    return Grammar(
        name="mistral", initial=C, wait_for_reasoning=reasoning,
        terminals={**think, "TOOL_CALLS": TOOL_CALLS, "ARGS": ARGS, "OPEN_BRACE": "{"},
        id_terminals=frozenset(t for t in think.values() if t == THINK or t == THINK_END) | {TOOL_CALLS, ARGS},
        transitions={**think_transitions,
                     (C, "TOOL_CALLS"): (N, start),
                     (N, "ARGS"): (A, ()),
                     (N, "OPEN_BRACE"): (A, (Ev.ARGS,)),
                     (A, "TOOL_CALLS"): (N, (Ev.CALL_END, Ev.CALL_START))})


MISTRAL_THINK = mistral_grammar(True)
# Mistral's own tokenizer with mistral-common's grammar but no [THINK] (Tekken v11): plain-text markers
MISTRAL_TEXT_THINK = mistral_grammar(True, "<think>", "</think>")
MISTRAL = mistral_grammar(False)


def _reasoning_vocab(ctx: ParserContext) -> bool:
    return ctx.tokenizer.token_to_id(THINK) is not None


def _grammar(ctx: ParserContext) -> Grammar:
    """vLLM's reasoning encoding: [THINK] in the vocabulary, else plain-text <think> when the
    tokenizer supports mistral-common's grammar (--tokenizer-mode mistral, Tekken v11+), else none."""
    if _reasoning_vocab(ctx):
        return MISTRAL_THINK
    return MISTRAL_TEXT_THINK if getattr(ctx.tokenizer, "supports_grammar", False) else MISTRAL


class MistralReasoningParser(EngineReasoningParser):
    name = "mistral"
    GRAMMAR = MISTRAL_THINK
    GRAMMAR_NO_THINKING = MISTRAL  # without [THINK] in the vocabulary: no reasoning at all
    MARKERS_REQUIRED = False  # without [THINK] there is simply no reasoning

    def __init__(self, ctx: ParserContext) -> None:
        self.GRAMMAR = _grammar(ctx)  # type: ignore[misc]  # this tokenizer's encoding
        super().__init__(ctx)

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return self.GRAMMAR is not MISTRAL  # without any think markers vLLM runs no reasoning at all

    def adjust_request(self, request: Any) -> Any:
        from core.renderers.mistral import apply_grammar, uses_grammar

        if uses_grammar(self.ctx.tokenizer, request, self.ctx.responses_api):  # vLLM runs the whole parser's
            return apply_grammar(self.ctx.tokenizer, request)  # adjust_request for its reasoning too
        return super().adjust_request(request)


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
            args = dumps(args)
        calls.append({"id": mistral_id(), "name": escape_lone_surrogates(name) if isinstance(name, str) else "",
                      "arguments": escape_lone_surrogates(args)})
    return calls


class MistralToolParser(EngineToolParser):
    """v11+: the engine; pre-v11: vLLM's legacy JSON-list reader (the `_legacy_*` methods)."""

    name = "mistral"
    STREAMER = JsonArgStreamer(first_value_only=True)

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        if tok.token_to_id(TOOL_CALLS) is None:
            raise ValueError("Mistral parser could not locate the tool call token in the tokenizer!")
        # Mistral's own tokenizer (--tokenizer-mode mistral) says its version, as vLLM reads it
        version = getattr(tok, "version", None)
        self.v11 = version >= 11 if isinstance(version, int) else tok.token_to_id(ARGS) is not None

    def grammar_for(self, ctx: ParserContext) -> Grammar:
        return _grammar(ctx)

    @classmethod
    def always_adjusts(cls, ctx: ParserContext) -> bool:
        return bool(getattr(ctx.tokenizer, "supports_grammar", False))  # the grammar, tool_choice none too

    def adjust_request(self, request: Any) -> Any:
        from core.renderers.mistral import apply_grammar, uses_grammar

        if uses_grammar(self.ctx.tokenizer, request, self.ctx.responses_api):
            return apply_grammar(self.ctx.tokenizer, request)
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

    # -- v11+: the engine with Mistral's rules (vllm/parser/mistral.py overrides) -----------

    def accept_name(self, name: Any) -> bool:
        return self.valid_name(name)  # once [ARGS] or "{" ends it, a name is final, "" included

    def name_in_args(self, call: CallState) -> str | None:
        return call["nm"]  # no JSON-embedded name in this format

    def name_and_args(self, raw: str) -> tuple[Any, str]:
        return "", self.args_json(raw, "")

    def args_json(self, raw: str, name: str) -> str:
        """The first JSON value of the stripped raw text (vLLM gh#48975), else that text."""
        stripped = raw.strip()
        if not stripped:
            return "{}"
        try:
            _, end = _DECODER.raw_decode(stripped)
        except ValueError:
            return stripped
        return stripped[:end]

    def header_certain(self, call: CallState) -> str | None:
        return call["nm"].strip() if call["sent"] and (call["nm"] or call["ra"]) else None

    def call_id(self, call: CallState) -> str | None:
        return mistral_id()

    # -- the contract, v11+ or pre-v11 --------------------------------------------------

    # pre-v11 phases (serialized as these letters)
    CONTENT = "C"  # before the marker
    SKIP = "S"  # after the marker, before the JSON
    JSON = "J"  # reading the JSON of the calls
    AFTER = "E"  # after it (dropped)
    FORCED = "F"  # "required" / a named tool: held whole, answered at the end (vLLM reads it whole)

    def start(self) -> State:
        if self.v11:
            return super().start()
        # h: a partial marker held; n: calls sent; js: the JSON scanner; c: the call being read;
        # raw: the JSON text, kept until a call goes out (or the forced output, held whole)
        return {"ph": self.FORCED if self._forced() else self.CONTENT, "h": "", "n": 0, "called": False,
                "js": None, "c": None, "raw": "" if self._forced() else None}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        if self.v11:
            return super().feed(state, text, token_ids)
        if self.ctx.tool_choice == "none" and self.ctx.tools:
            return text, []  # pre-v11 with tool_choice "none": the output is content as written
        content: list[str] = []
        out: list[ToolCallDelta] = []
        self._feed_legacy(state, text, content, out)
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        if self.v11:
            return super().finish(state)
        content: list[str] = []
        out: list[ToolCallDelta] = []
        if state["ph"] == self.FORCED:
            self._legacy_held(state, content, out)
        elif not (self.ctx.tool_choice == "none" and self.ctx.tools):
            held, state["h"] = state["h"], ""
            if held and state["ph"] == self.CONTENT:
                content.append(held)
            elif held:
                self._feed_legacy(state, held, content, out, final=True)
            self._finish_legacy(state, content, out)
        return "".join(content), merge_tool_deltas(out)

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if self.v11:
            return super().extract_complete(text, token_ids)
        return self._legacy_extract(text)

    def _legacy_extract(self, text: str) -> tuple[list[dict[str, Any]] | None, str | None]:
        """vLLM's `_legacy_extract_tool_calls` (non-streaming), but for the text before
        `[TOOL_CALLS]` when no valid call follows: kept in front of the body (vLLM drops it)."""
        # the legacy reader's content is returned as it is ("" included) under tool_choice "none"
        if self.ctx.tool_choice == "none" and self.ctx.tools:
            return None, text
        content = None
        if TOOL_CALLS in text:
            content, *segments = text.split(TOOL_CALLS)
            body = next((s.strip() for s in segments if s.strip()), "")
        elif self._forced():
            body = text.strip()
        else:
            return None, text
        try:
            parsed, _ = _DECODER.raw_decode(body)
        except ValueError:
            # vLLM then looks for a `[{...}]` anywhere in the body. A forced output is held whole,
            # so the stream answers the same; otherwise the stream has sent the text in front of
            # it as content by then, and it is no call here either (README, "vLLM 0.33 bugs we do
            # not follow")
            found = _LIST_RE.findall(body) if self._forced() else None
            try:
                parsed = json.loads(found[0]) if found else None
            except ValueError:
                parsed = None
        calls = _pre_v11_calls(parsed)
        if not calls:
            # vLLM's content is then the body alone; the text before the marker, which the
            # stream sent before the marker appeared, stays (README, "vLLM 0.33 bugs we do not follow")
            return None, body if content is None else content + body
        return calls, content if content and content.strip() else None

    # pre-v11 ------------------------------------------------------------------------------

    def _feed_legacy(self, state: State, text: str, content: list[str], out: list[ToolCallDelta],
                     final: bool = False) -> None:
        if state["ph"] == self.FORCED:
            state["raw"] += text
            return
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        if state["ph"] == self.CONTENT:
            at = buf.find(TOOL_CALLS)
            if at == -1:
                keep = partial_suffix(buf, (TOOL_CALLS,))
                content.append(buf[:len(buf) - keep])
                state["h"] = buf[len(buf) - keep:]
                return
            content.append(buf[:at])
            buf = buf[at + len(TOOL_CALLS):]
            state["ph"] = self.SKIP
        if not final:  # a marker split across feeds must not reach the JSON
            keep = partial_suffix(buf, (TOOL_CALLS,))
            if keep:
                state["h"] = buf[len(buf) - keep:]
                buf = buf[:len(buf) - keep]
        if state["ph"] == self.SKIP:
            stripped = buf.lstrip()
            while stripped.startswith(TOOL_CALLS):  # empty segments between markers count as none
                stripped = stripped[len(TOOL_CALLS):].lstrip()
            if not stripped:
                return
            state["ph"] = self.JSON
            state["raw"] = ""
            state["js"] = new_state(2 if stripped[0] == "[" else 1)
            buf = stripped
        if state["ph"] in (self.JSON, self.AFTER):
            cut = buf.find(TOOL_CALLS)
            piece = buf if cut == -1 else buf[:cut]
            if state["raw"] is not None and not state.get("segment_done"):
                state["raw"] += piece  # the JSON segment, kept until a call is sent (plain-content fallback)
            if cut != -1:
                state["segment_done"] = True
            if state["ph"] == self.JSON:
                scanner = JsonScanner(state["js"])
                scanner.feed(piece)
                self._legacy_events(state, scanner.events, out)
                if state["js"]["done"] or state["js"]["err"] or cut != -1:
                    state["ph"] = self.AFTER

    def _legacy_held(self, state: State, content: list[str], out: list[ToolCallDelta]) -> None:
        """A forced output, held whole: vLLM's non-streaming answer, at once."""
        calls, text = self._legacy_extract(state["raw"])
        state["raw"] = None
        for index, call in enumerate(calls or ()):
            out.append({"index": index, "id": call["id"], "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]}})
        if calls:
            state["called"] = True
        if text:
            content.append(text)

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
                self._legacy_header(state, call, escape_lone_surrogates(name) if isinstance(name, str) else "", out)
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
        if state["ph"] in (self.JSON, self.AFTER) and state["js"] is not None:
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
    return escape_lone_surrogates(value) if isinstance(value, str) else dumps(value)


def _dump(value: Any) -> Any:
    from pydantic import BaseModel

    return value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value

