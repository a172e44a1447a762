"""Reasoning and tool parsers on top of the engine (core/parsers/engine.py), with vLLM's rules.

The reasoning side is vLLM's `ParserEngineReasoningAdapter`: the engine with tool parsing
skipped; reasoning chunks are reasoning (right-stripped when the grammar says so), text chunks
are content. It is chunking-invariant by construction: the lexer holds partial literals.

The tool side is vLLM's `ParserEngineToolAdapter` + `ParserEngine._events_to_delta` /
`_build_extracted_result`, turned into a stream whose deltas add up to the non-streaming answer:

* content before the first tool event is content; its trailing whitespace is held (the answer
  is right-stripped when calls are found), and all of it while it is only whitespace; its
  leading whitespace goes out with the first other character, and the non-streaming answer
  keeps it too (vLLM's strips it, though its own stream sends it: a vLLM bug we do not follow);
* text after the first tool event is dropped once a call's name went out, else held (it is
  content only if no call is found at all: a call to an unknown tool, markup without a name);
* a call's header goes out as soon as its name is final and the call is certain to be in the
  answer; its arguments stream through a family `ArgStreamer` that emits only what must be a
  prefix of the final arguments; at the end of the call the final arguments are computed from
  its raw text (converter, schema types) and the rest is sent. The state holds the current call's
  raw text only. A call cut off or broken after part of it streamed cannot be taken back.
* under tool_choice "none" with tools (vLLM's `_suppress_tool_calls`) tool events are ignored and
  all text outside tool markup is content, as written;
* behind a classic reasoning parser (vLLM's composition is then not engine-based) an output
  without a call is the content as written: from the first markup the engine reads or drops on,
  the raw text is held (`rx`, at most MAX_RAW_HOLD characters) with the engine's content
  (`rc`) until a call is certain (then the engine's content goes out) or the output ends. Past
  MAX_RAW_HOLD the engine's content goes out, and the non-streaming answer is that content too
  (vLLM's keeps the raw text, though its own stream sends the engine's content for any length:
  README, "vLLM 0.33 bugs we do not follow").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar, NotRequired, TypedDict

from core.parsers.base import ParserContext, ReasoningParser, State, ToolCallDelta, ToolParser, aggregate_tool_deltas
from core.parsers.coercion import fix_arg_types, tool_properties
from core.parsers.engine import Engine, EngineState, Ev, Event, Grammar, Phase
from core.parsers.jsonstream import JsonScanner, dumps, escape_lone_surrogates, new_state
from core.parsers.text import merge_tool_deltas

_NAME_IN_ARGS = re.compile(r'"name"\s*:\s*"([^"]*)"')
# classic composition: the most raw text held after tool markup while no call is certain
MAX_RAW_HOLD = 4096


# -- reasoning ----------------------------------------------------------------------------

class EngineReasoningState(TypedDict):
    e: EngineState
    rw: NotRequired[str]  # trailing whitespace of the reasoning, held until more reasoning follows


class EngineReasoningParser(ReasoningParser):
    """Reasoning through a family grammar (vLLM's `ParserEngineReasoningAdapter`).

    The token ids that end reasoning, the one that opens it and whether a prompt without them
    leaves it open come from the grammar, as vLLM derives them (`is_reasoning_end`). With
    thinking off, Qwen3-style families return the output untouched (`PASS_THROUGH_WITHOUT_THINKING`);
    the others run their no-thinking grammar.
    """

    GRAMMAR: ClassVar[Grammar]
    GRAMMAR_NO_THINKING: ClassVar[Grammar | None] = None
    BOUNDARIES: ClassVar[tuple[str, ...]] = ()  # turn boundaries: a prompt's markers count after the last
    MARKERS_REQUIRED: ClassVar[bool] = True  # a tokenizer without the think tokens is refused
    PASS_THROUGH_WITHOUT_THINKING: ClassVar[bool] = True
    engine_based = True

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.thinking = self.thinking_enabled(ctx)
        grammar = self.GRAMMAR if self.thinking else (self.GRAMMAR_NO_THINKING or self.GRAMMAR)
        self.engine = Engine(grammar, ctx.tokenizer)
        tok = ctx.tokenizer
        start, end = self.GRAMMAR.literal("THINK_START"), self.GRAMMAR.literal("THINK_END")
        if self.MARKERS_REQUIRED and (start is None or end is None or tok.token_to_id(start) is None
                                     or tok.token_to_id(end) is None):
            raise ValueError(f"{self.name} reasoning parser could not locate think start/end tokens in the tokenizer!")
        self.start_id = self._id_terminal(grammar, "THINK_START")
        self.end_id = self._id_terminal(grammar, "THINK_END")
        self.boundary_ids = frozenset(i for i in (tok.token_to_id(t) for t in self.BOUNDARIES) if i is not None)
        self.reasoning_end_ids = self._reasoning_end_ids(grammar)
        opener = grammar.transitions.get((grammar.initial, "THINK_START"))
        self.start_opens_reasoning = opener is not None and opener[0] == Phase.REASONING

    def _id_terminal(self, grammar: Grammar, terminal: str) -> int | None:
        text = grammar.literal(terminal)
        return self.ctx.tokenizer.token_to_id(text) if text in grammar.id_terminals else None

    def _reasoning_end_ids(self, grammar: Grammar) -> frozenset[int]:
        """vLLM's `_derive_reasoning_end_token_ids`: the ids of the terminals that end reasoning
        (none at all when reasoning can also end another way, or by a terminal without an id)."""
        ends: dict[str, str] = {}
        for (phase, terminal), (nxt, events) in grammar.transitions.items():
            if phase != Phase.REASONING:
                continue
            if Ev.REASONING_END in events:
                ends.setdefault(terminal, nxt)
            elif nxt != Phase.REASONING:
                return frozenset()
        ids: set[int] = set()
        for terminal, nxt in ends.items():
            tid = self._id_terminal(grammar, terminal)
            if tid is not None:
                ids.add(tid)
            elif nxt == Phase.CONTENT:
                return frozenset()
        return frozenset(ids)

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return True

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        """vLLM's set_prompt_token_ids: content when the prompt already closed reasoning (only
        grammars with turn boundaries can tell), else the grammar's initial phase."""
        if prompt_token_ids and self.boundary_ids and self.is_reasoning_end(prompt_token_ids):
            return Phase.CONTENT
        return self.engine.grammar.initial

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """vLLM's `ParserEngine.is_reasoning_end` on the grammar in use."""
        for tid in reversed(token_ids):
            if tid in self.reasoning_end_ids:
                return True
            if tid == self.start_id:
                if self.start_opens_reasoning:
                    return False
                break
            if tid in self.boundary_ids:
                break
        return not self.engine.grammar.waits_for_reasoning

    def _passes_through(self) -> bool:
        return not self.thinking and self.PASS_THROUGH_WITHOUT_THINKING

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False  # the engine needs the markers' text
        return request

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        state = {"e": self.engine.start(self.initial_phase(prompt_token_ids))}
        if self.engine.grammar.strip_trailing_reasoning_whitespace:
            state["rw"] = ""
        return state

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if self._passes_through():
            return "", text
        return self._split(state, self.engine.feed(state["e"], text, skip_tools=True))

    def finish(self, state: State) -> tuple[str, str]:
        if self._passes_through():
            return "", ""
        reasoning, content = self._split(state, self.engine.feed(state["e"], "", final=True, skip_tools=True))
        if "rw" in state:
            state["rw"] = ""  # the reasoning is right-stripped: held trailing whitespace is dropped
        return reasoning, content

    def _split(self, state: State, events: list[Event]) -> tuple[str, str]:
        if len(events) == 1:  # the common token: one piece of one kind
            kind, value = events[0]
            reasoning = value if kind == Ev.REASONING else ""
            content = value if kind == Ev.TEXT else ""
        else:
            reasoning = "".join(v for k, v in events if k == Ev.REASONING)
            content = "".join(v for k, v in events if k == Ev.TEXT)
        if reasoning and self.engine.grammar.strip_trailing_reasoning_whitespace:
            text = state["rw"] + reasoning
            body = text.rstrip()
            state["rw"] = text[len(body):]
            reasoning = body
        return reasoning, content

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if self._passes_through():
            return None, text  # vLLM returns the output untouched, "" included
        return super().parse_complete(text, token_ids, prompt_token_ids)


# -- tool calls ---------------------------------------------------------------------------

class CallState(TypedDict):
    """The call being read (vLLM's `ToolCallSlot`) and what of it was streamed."""

    nm: str  # name text (vLLM's slot.name, with the family's rewrites)
    ra: str  # raw argument text
    sent: bool  # vLLM's name_sent: the name went out (text after calls is then dropped)
    id: str  # an id the family read from the output (kimi_k2), else ""
    hdr: bool  # our header delta went out
    out: int  # the call's index in the answer (once the header went out)
    sl: int  # length of the arguments streamed so far
    a: dict[str, Any] | None  # the argument streamer's state


class EngineToolState(TypedDict):
    e: EngineState
    seen: bool  # a tool event happened: later text is deferred (vLLM's seen_tool_event)
    slots: bool  # a call started (vLLM's _tool_slots non-empty)
    sent: bool  # a call name went out: deferred text is dropped (vLLM's tool_call_deltas)
    called: bool  # a call is in the answer (vLLM's tools_called)
    n: int  # calls in the answer so far
    cw: str  # held whitespace of the content before the first tool event
    nw: bool  # that content had non-whitespace (everything before `cw` was sent)
    d: str  # text after the first tool event, held while no name went out
    c: CallState | None
    ns: bool  # non-streaming: arguments are computed once, at the end of each call
    rx: str | None  # classic composition: the raw text from the first markup the engine reads (or
    # drops) on, while no call is in the answer (the content if none comes); None once one is, or
    # past MAX_RAW_HOLD
    rc: str  # the engine's content since then, held until a call is in the answer


class ArgStreamer:
    """Streams a call's arguments before the call ends; the base streams nothing (the whole
    arguments go out with the end of the call).

    A streamer that knows the final arguments without the call's raw text (`keeps_raw` False)
    gets each argument text once, and `finish` gives the rest of the arguments at the call's end;
    the raw text is then not kept once the header went out.
    """

    keeps_raw: ClassVar[bool] = True

    def start(self, parser: EngineToolParser, call: CallState) -> dict[str, Any] | None:
        return None

    def feed(self, parser: EngineToolParser, call: CallState, text: str) -> str:
        return ""

    def finish(self, parser: EngineToolParser, call: CallState) -> str:
        raise NotImplementedError  # only streamers with keeps_raw False are asked


class EngineToolParser(ToolParser):
    """Tool calls through a family grammar (vLLM's engine tool adapter)."""

    GRAMMAR: ClassVar[Grammar]
    STREAMER: ClassVar[ArgStreamer] = ArgStreamer()
    supports_required_and_named = False
    engine_based = True

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.engine = Engine(self.grammar_for(ctx), ctx.tokenizer)
        self.grammar = self.engine.grammar
        # no reasoning parser: reasoning markup the grammar knows is plain text here
        self.skip_reasoning = ctx.reasoning_parser is None
        # a classic reasoning parser in front (vLLM's composition is then not engine-based): an
        # output without a call is content as written, markup included
        self.raw_fallback = not ctx.engine_composition
        # tool_choice "none" with tools: vLLM ignores the tool events, the text stays content
        self.suppress = ctx.tool_choice == "none" and bool(ctx.tools)
        self.names = {(t.get("function") or {}).get("name") for t in ctx.tools or ()}

    def grammar_for(self, ctx: ParserContext) -> Grammar:
        return self.GRAMMAR

    # -- vLLM's name and argument rules (families override like vLLM's subclasses) ------

    def valid_name(self, name: Any) -> bool:
        return not self.grammar.validate_tool_names or not self.ctx.tools or name in self.names

    def accept_name(self, name: Any) -> bool:
        return bool(name) and self.valid_name(name)

    def emit_name(self, state: EngineToolState, call: CallState, name: str | None) -> None:
        """vLLM's `_emit_name_delta`: the name goes out if accepted."""
        if name is None or not self.accept_name(name):
            return
        call["nm"] = name
        self._mark_sent(state, call)

    def name_in_args(self, call: CallState) -> str | None:
        """vLLM's `_try_extract_name`: a `"name": "..."` in the raw arguments."""
        m = _NAME_IN_ARGS.search(call["ra"])
        return m.group(1) or None if m else None

    def on_call_end(self, call: CallState) -> None:
        """vLLM's `_handle_tool_end` family hook, before the base rule."""

    def convert_args(self, raw: str, name: str) -> str:
        """The arguments of a call with a name (vLLM's arg_converter or `_extract_args_json`)."""
        return self.args_json(raw, name)

    def args_json(self, raw: str, name: str) -> str:
        """vLLM's `_extract_args_json`."""
        if not raw.strip():
            return "{}"
        return self.name_and_args(raw)[1]

    def name_and_args(self, raw: str) -> tuple[Any, str]:
        """vLLM's `_extract_name_and_args`: a JSON body {"name", "arguments"|"parameters"}."""
        raw = raw.strip()
        try:
            parsed = json.loads(raw)
        except ValueError:
            return "", raw
        if not isinstance(parsed, dict):
            return "", raw
        name = parsed.get("name", "")
        if isinstance(name, str):
            name = escape_lone_surrogates(name)
        for key in ("arguments", "parameters"):
            if key in parsed:
                value = parsed[key]
                return name, escape_lone_surrogates(value) if isinstance(value, str) else dumps(value)
        return name, dumps({k: v for k, v in parsed.items() if k != "name"})

    def final_call(self, call: CallState) -> tuple[str, str] | None:
        """vLLM's `_build_extracted_result` for one slot: (name, arguments) or no call."""
        if not call["nm"] and not call["ra"]:
            return None
        name: Any = call["nm"].strip()
        raw = call["ra"]
        if not name and raw.strip():
            name, args = self.name_and_args(raw)
        elif raw.strip():
            args = self.convert_args(raw, name)
        else:
            args = "{}"
        if not isinstance(name, str) or not self.accept_name(name):
            return None  # (a non-string JSON name makes vLLM fail; no call here)
        return name, fix_arg_types(args, name, self.ctx.tools)

    def header_certain(self, call: CallState) -> str | None:
        """The call's final name, once it is certain the call will be in the answer."""
        if not call["sent"]:
            return None
        name = call["nm"].strip()
        return name if name and self.accept_name(name) else None

    def call_id(self, call: CallState) -> str | None:
        return call["id"] or None

    def coerces(self, name: str) -> bool:
        """Whether the tool's schema may change argument types (then JSON arguments are held)."""
        return bool(self.ctx.tools) and bool(tool_properties(self.ctx.tools, name))

    # -- the stream ---------------------------------------------------------------------

    def start(self) -> State:
        return {"e": self.engine.start(Phase.CONTENT), "seen": False, "slots": False, "sent": False,
                "called": False, "n": 0, "cw": "", "nw": False, "d": "", "c": None, "ns": False,
                "rx": "" if self.raw_fallback else None, "rc": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        events = self.engine.feed(state["e"], text, skip_reasoning=self.skip_reasoning,
                                  raw=state["rx"] is not None)
        content: list[str] = []
        out: list[ToolCallDelta] = []
        self._events(state, events, content, out)
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        events = self.engine.feed(state["e"], "", final=True, skip_reasoning=self.skip_reasoning,
                                  raw=state["rx"] is not None)
        content: list[str] = []
        out: list[ToolCallDelta] = []
        self._events(state, events, content, out)
        if state["c"] is not None:
            self._end_call(state, out)
        content.append(self._final_content(state))
        return "".join(content), merge_tool_deltas(out)

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        state = self.start()
        state["ns"] = True  # (the raw text is held as the stream holds it: the same content)
        content, deltas = self.feed(state, text, token_ids)
        tail, more = self.finish(state)
        content = (content + tail) or None
        if not state["called"]:
            return None, content
        return aggregate_tool_deltas(deltas + more), content

    def _events(self, state: EngineToolState, events: list[Event], content: list[str],
                out: list[ToolCallDelta]) -> None:
        for kind, value in events:
            if kind == Ev.TEXT:
                self._text(state, value, content)
            elif kind == Ev.RAW:
                self._raw(state, value, content)
            elif self.suppress or kind not in (Ev.CALL_START, Ev.NAME, Ev.ARGS, Ev.CALL_END):
                continue
            elif kind == Ev.CALL_START:
                if state["c"] is not None:  # (every grammar ends a call before the next starts)
                    self._end_call(state, out)
                state["seen"] = state["slots"] = True
                state["c"] = {"nm": "", "ra": "", "sent": False, "id": "", "hdr": False, "out": -1, "sl": 0,
                              "a": None}
            elif state["c"] is None:
                continue
            elif kind == Ev.NAME:
                state["seen"] = True
                state["c"]["nm"] += value
            elif kind == Ev.ARGS:
                state["seen"] = True
                self._args(state, state["c"], value, out)
            else:
                self._end_call(state, out)
        self._release_held_content(state, content)

    def _text(self, state: EngineToolState, text: str, content: list[str]) -> None:
        if self.suppress:
            content.append(text)
        elif state["seen"]:
            if not state["sent"]:
                state["d"] += text
        elif state["rx"]:
            state["rc"] += text  # the answer may yet be the raw text: held until a call is certain
        else:
            self._content_text(state, text, content)

    def _content_text(self, state: EngineToolState, text: str, content: list[str]) -> None:
        """Content before the first tool event, with the whitespace vLLM may strip held back."""
        if state["ns"]:
            state["cw"] += text  # non-streaming: vLLM's whitespace rules apply to the whole content
        elif self.grammar.strip_content_whitespace_with_tools:
            body = text.rstrip()
            if not body:
                state["cw"] += text
                return
            content.append(state["cw"] + body)
            state["cw"] = text[len(body):]
            state["nw"] = True
        elif state["nw"]:
            content.append(text)
        elif text.strip():
            content.append(state["cw"] + text)
            state["cw"] = ""
            state["nw"] = True
        else:
            state["cw"] += text

    def _raw(self, state: EngineToolState, text: str, content: list[str]) -> None:
        if state["rx"] is not None and not state["called"]:
            state["rx"] += text
            if len(state["rx"]) <= MAX_RAW_HOLD:
                return
            state["rx"] = None  # too long to hold: the engine's content it is (documented)
        self._release_held_content(state, content)

    def _release_held_content(self, state: EngineToolState, content: list[str]) -> None:
        """A call is in the answer (or the raw text was given up): the engine's content held
        while the answer could still be the raw text goes out."""
        if state["rc"] and state["rx"] is None:
            held, state["rc"] = state["rc"], ""
            self._content_text(state, held, content)

    def _final_content(self, state: EngineToolState) -> str:
        """What of the content is still to be sent: held whitespace and deferred text, by
        vLLM's rules (the content is right-stripped when calls are found, see `_content_text`;
        blank content is dropped when a call started); in the classic composition without a call, the text as written."""
        grammar = self.grammar
        deferred = "" if state["sent"] else state["d"]
        rest = state["cw"] + deferred
        if state["rx"] and not state["called"]:
            rest = state["cw"] + state["rx"]
            state["rx"] = state["cw"] = state["d"] = state["rc"] = ""
            return rest
        state["cw"] = state["d"] = ""
        if self.suppress:
            return rest
        if not state["nw"]:
            if not rest.strip() and state["slots"] and grammar.drop_whitespace_only_content_before_tools:
                return ""
            if state["called"]:
                if grammar.strip_content_whitespace_with_tools:
                    # (vLLM strips both ends; its own stream, as ours, sent the leading whitespace
                    # with the first other character: README, "vLLM 0.33 bugs we do not follow")
                    return rest.rstrip() if rest.strip() else ""
                if grammar.drop_whitespace_only_content_before_tools and not rest.strip():
                    return ""
            return rest
        if state["called"] and grammar.strip_content_whitespace_with_tools:
            return rest.rstrip()
        return rest

    def _mark_sent(self, state: EngineToolState, call: CallState) -> None:
        call["sent"] = True
        state["sent"] = True
        state["d"] = ""

    def _args(self, state: EngineToolState, call: CallState, value: str, out: list[ToolCallDelta]) -> None:
        if not (call["hdr"] and not self.STREAMER.keeps_raw):
            call["ra"] += value
        if not call["sent"]:
            if call["nm"]:
                self.emit_name(state, call, call["nm"])
            elif value:
                self.emit_name(state, call, self.name_in_args(call))
        if state["ns"]:
            return
        if not call["hdr"]:
            self._header(state, call, out)
            if call["hdr"]:
                value = call["ra"]  # everything so far streams from the start
                if not self.STREAMER.keeps_raw:
                    call["ra"] = ""
        if call["hdr"] and value:
            piece = self.STREAMER.feed(self, call, value)
            if piece:
                call["sl"] += len(piece)
                out.append({"index": call["out"], "function": {"arguments": piece}})

    def _header(self, state: EngineToolState, call: CallState, out: list[ToolCallDelta]) -> None:
        name = self.header_certain(call)
        if name is None:
            return
        call["hdr"] = True
        call["out"] = state["n"]
        state["n"] += 1
        state["called"] = True
        state["rx"] = None
        call["a"] = self.STREAMER.start(self, call)
        out.append({"index": call["out"], "id": self.call_id(call), "type": "function",
                    "function": {"name": name, "arguments": ""}})

    def _end_call(self, state: EngineToolState, out: list[ToolCallDelta]) -> None:
        call = state["c"]
        state["c"] = None
        self.on_call_end(call)
        if call["hdr"] and not self.STREAMER.keeps_raw:
            rest = self.STREAMER.finish(self, call)
            if rest:
                out.append({"index": call["out"], "function": {"arguments": rest}})
            return
        if not call["sent"]:
            name = call["nm"] or self.name_in_args(call) or ""
            if self.accept_name(name):
                call["nm"] = name
                self._mark_sent(state, call)
        final = self.final_call(call)
        if final is None:
            return  # (a header never goes out for a call that is not certain)
        name, args = final
        if not call["hdr"]:
            call["out"] = state["n"]
            state["n"] += 1
            state["called"] = True
            state["rx"] = None
            out.append({"index": call["out"], "id": self.call_id(call), "type": "function",
                        "function": {"name": name, "arguments": args}})
            return
        if len(args) > call["sl"]:
            out.append({"index": call["out"], "function": {"arguments": args[call["sl"]:]}})


# -- argument streamers -------------------------------------------------------------------

class JsonArgStreamer(ArgStreamer):
    """Raw JSON arguments (kimi_k2, mistral): streamed as written, leading and trailing
    whitespace held (the answer strips them); for mistral, only the first JSON value. When the
    tool's schema may change a type the whole arguments wait for the end of the call (then vLLM
    re-serializes them)."""

    def __init__(self, first_value_only: bool = False) -> None:
        self.first_value_only = first_value_only

    def start(self, parser: EngineToolParser, call: CallState) -> dict[str, Any] | None:
        if parser.coerces(call["nm"].strip()):
            return {"hold": True}
        return {"hold": False, "lead": True, "tw": "", "js": new_state(0) if self.first_value_only else None}

    def feed(self, parser: EngineToolParser, call: CallState, text: str) -> str:
        st = call["a"]
        if st is None or st["hold"] or st.get("stop"):
            return ""
        if st["lead"]:
            text = text.lstrip()
            if not text:
                return ""
            st["lead"] = False
        js = st["js"]
        if js is not None and not js["err"]:
            used = JsonScanner(js).feed(text)
            if js["done"]:
                text = text[:used]
                st["stop"] = True
        text = st["tw"] + text
        body = text.rstrip()
        st["tw"] = text[len(body):]
        return body
