"""The chat output parser: reasoning parser, then tool parser, with the request's semantics.

This is what derender (raw `/derender`) and the front door call. It composes the configured
families the way vLLM 0.33's `DelegatingParser` + `assemble_chat_message_fields` do
(vllm/parser/abstract_parser.py, vllm/entrypoints/openai/chat_completion/message_assembly.py):

* tool parsers only with `--enable-auto-tool-choice`; `tool_choice` "none" passes content
  through, a named tool makes the content the arguments, "required" reads a JSON list
  `[{"name", "parameters"}]`, "auto" runs the family;
* tool calls are kept only for required/named, or auto with tools and a tool parser; forced
  calls turn a null content into ""; `parallel_tool_calls: false` keeps only the first call;
* `include_reasoning: false` hides reasoning; `finish_reason` becomes "tool_calls" when calls
  were returned, the engine said "stop" and the choice is not a named tool;
* whitespace-only content before tool calls is dropped (held back while streaming until it is
  known whether a call follows), except for a `unified` family (Harmony: one grammar for
  reasoning and calls, fed on every step, its content taken as it gives it);
* an engine tool parser behind a classic reasoning parser is composed the classic way (vLLM's
  `_engine_based` is false): an output without a call, or tool_choice "none", keeps its markup;
* vLLM's engine families (core/parsers/engine.py) drop the text of the tokenizer's other special
  tokens inside their own lexer, in the reasoning pass and in the tool pass, as vLLM does.

All progress lives in one JSON-able `state` dict (the families' states inside it); its size is
bounded by the current tool call, not by the output. Tool-call ids are derived from a per-stream
random seed and the call index, so a retried chunk with the same state gets the same id.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

from pydantic import BaseModel, TypeAdapter, ValidationError

from core.model import ModelInfo
from core.parsers.base import ParserContext, ReasoningParser, ToolCallDelta, ToolParser
from core.parsers.jsonstream import JsonScanner, dumps, escape_lone_surrogates, new_state
from core.parsers.registry import get_reasoning_parser, get_tool_parser


class _FunctionDefinition(BaseModel):
    """The shape vLLM validates a tool_choice="required" output against."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


_REQUIRED_LIST = TypeAdapter(list[_FunctionDefinition])


class OutputState(TypedDict):
    """The pipeline's progress (in stream_state: the keys are short, the meaning is here)."""

    r: Any  # the reasoning parser's state, or None
    t: Any  # the tool family's state (auto), NamedState, RequiredState, or None
    ts: bool  # tool calls were streamed (the finish_reason becomes "tool_calls")
    ws: str  # content held while it is all whitespace
    nw: bool  # content had non-whitespace (nothing more is held)
    inw: bool  # the tool family got non-whitespace content (vLLM's forced-choice rule)
    fc: NotRequired[bool]  # the family found a call (whitespace-only content is dropped)
    seed: str  # per-stream seed of the tool-call ids


class NamedState(TypedDict):
    hdr: bool  # the call's header went out (the content is its arguments)


class RequiredCall(TypedDict):
    nm: str  # the name's JSON text while it is read
    hdr: bool  # the header went out
    pa: str  # arguments read before the name
    p: bool  # a "parameters" key was seen


class RequiredState(TypedDict):
    js: dict[str, Any]  # the JSON scanner over the list of calls
    n: int  # calls sent
    cur: RequiredCall | None


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=False)
    return value


def tool_choice_of(request: Any) -> tuple[str, str | None]:
    """("auto"|"none"|"required"|"named", named function or None)."""
    choice = getattr(request, "tool_choice", None)
    if isinstance(choice, str):
        return choice, None
    if choice is None:
        return ("auto" if getattr(request, "tools", None) else "none"), None
    choice = _dump(choice)
    if isinstance(choice, dict):
        function = choice.get("function") or {}
        name = function.get("name") if isinstance(function, dict) else None
        return "named", name
    return "none", None


def history_tool_call_count(request: Any) -> int:
    count = 0
    for message in getattr(request, "messages", None) or ():
        message = _dump(message)
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                count += len(calls)
    return count


class ChatOutputParser:
    """Per-request parser; immutable configuration, progress in the caller's state dict."""

    def __init__(self, *, model: ModelInfo, reasoning: ReasoningParser | None, tools: ToolParser | None,
                 request: Any, enable_auto_tool_choice: bool) -> None:
        self.model = model
        self.reasoning = reasoning
        self.tools = tools
        self.request = request
        self.choice, self.named = tool_choice_of(request)
        self.include_reasoning = getattr(request, "include_reasoning", True) is not False
        self.parallel = getattr(request, "parallel_tool_calls", True) is not False
        self.forced = self.choice in ("required", "named")
        self.forced_blank = self.forced and (tools is None or tools.forced_blank_dropped)
        # vLLM's `_engine_based` composition: an engine tool parser behind no reasoning parser or
        # an engine-based one (its markup-free content is the answer even without a call, and it
        # runs under tool_choice "none" too)
        self.engine_based = tools is not None and tools.engine_based and (reasoning is None or reasoning.engine_based)
        self.keeps_calls = self.forced or (
            enable_auto_tool_choice and tools is not None and self.choice == "auto"
            and bool(getattr(request, "tools", None)))
        if tools is None:
            self.mode = "plain"  # no tool phase: content passes through
        elif self.choice == "none":
            self.mode = "auto" if self.engine_based else "plain"  # calls are dropped by the gate
        elif self.choice == "named" and tools.supports_required_and_named:
            self.mode = "named"
        elif self.choice == "required" and tools.supports_required_and_named:
            self.mode = "required"
        elif enable_auto_tool_choice:
            self.mode = "auto"
        else:
            self.mode = "plain"

    @classmethod
    def for_request(cls, *, model: ModelInfo, reasoning_parser: str | None, tool_call_parser: str | None,
                    enable_auto_tool_choice: bool, request: Any,
                    chat_template_kwargs: dict[str, Any]) -> ChatOutputParser | None:
        reasoning_cls = get_reasoning_parser(reasoning_parser) if reasoning_parser else None
        tool_cls = get_tool_parser(tool_call_parser) if (tool_call_parser and enable_auto_tool_choice) else None
        if reasoning_cls is None and tool_cls is None:
            return None
        tools = getattr(request, "tools", None)
        ctx = ParserContext(tokenizer=model.tokenizer,
                            tools=[_dump(t) for t in tools] if tools else None,
                            chat_template_kwargs=dict(chat_template_kwargs or {}),
                            request_chat_template_kwargs=dict(getattr(request, "chat_template_kwargs", None) or {}),
                            history_tool_call_count=history_tool_call_count(request),
                            reasoning_parser=reasoning_parser,
                            tool_call_parser=tool_call_parser if tool_cls else None,
                            tool_choice=_dump(getattr(request, "tool_choice", None)),
                            include_reasoning=getattr(request, "include_reasoning", True) is not False,
                            engine_composition=reasoning_cls is None or reasoning_cls.engine_based)
        return cls(model=model, reasoning=reasoning_cls(ctx) if reasoning_cls else None,
                   tools=tool_cls(ctx) if tool_cls else None, request=request,
                   enable_auto_tool_choice=enable_auto_tool_choice)

    @staticmethod
    def check_supported(model: ModelInfo, reasoning_parser: str | None, tool_call_parser: str | None,
                        enable_auto_tool_choice: bool) -> None:
        """Start-up check, like vLLM's: unknown names, or a tokenizer without the family's
        markers, raise ValueError with a message naming the flag (call it before serving)."""
        ctx = ParserContext(tokenizer=model.tokenizer, reasoning_parser=reasoning_parser)
        try:
            if reasoning_parser:
                get_reasoning_parser(reasoning_parser)(ctx)
            if tool_call_parser and enable_auto_tool_choice:
                get_tool_parser(tool_call_parser)(ctx)
        except (KeyError, ValueError) as exc:
            flags = []
            if tool_call_parser and enable_auto_tool_choice:
                flags.append(f"--tool-call-parser {tool_call_parser}")
            if reasoning_parser:
                flags.append(f"--reasoning-parser {reasoning_parser}")
            message = exc.args[0] if exc.args else str(exc)
            raise ValueError(f"{' and '.join(flags)} cannot be used with the tokenizer of "
                             f"{model.name!r}: {message}") from None

    # -- render side ------------------------------------------------------------------------

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool | None:
        return self.reasoning.is_reasoning_end(prompt_token_ids) if self.reasoning else None

    # -- streaming --------------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int] | None) -> dict[str, Any]:
        """A new stream's state: a JSON-able dict (it goes into stream_state)."""
        tools: Any = None
        if self.mode == "auto":
            tools = self.tools.start()
        elif self.mode == "named":
            tools = NamedState(hdr=False)
        elif self.mode == "required":
            tools = RequiredState(js=new_state(2), n=0, cur=None)
        state = OutputState(r=self.reasoning.start(prompt_token_ids) if self.reasoning else None, t=tools,
                            ts=False, ws="", nw=False, inw=False, seed=secrets.token_hex(8))
        return dict(state)

    def feed(self, state: dict[str, Any], text: str, token_ids: Sequence[int]) -> dict[str, Any] | None:
        if self.reasoning is not None:
            reasoning, content = self.reasoning.feed(state["r"], text, token_ids)
        else:
            reasoning, content = "", text
        content, calls = self._tool_phase(state, content, token_ids, final=False)
        return self._delta(state, reasoning, content, calls)

    def finish(self, state: dict[str, Any]) -> dict[str, Any] | None:
        reasoning, content = self.reasoning.finish(state["r"]) if self.reasoning is not None else ("", "")
        content, calls = self._tool_phase(state, content, (), final=True)
        if self.reasoning is not None:
            # (vLLM's finalize_generation: appended to the content as it is, past the tool parser)
            content += self.reasoning.repeat(state["r"])
        return self._delta(state, reasoning, content, calls)

    def finish_reason(self, state: dict[str, Any], finish_reason: str | None) -> str | None:
        """Streaming: "tool_calls" when calls were streamed, the engine said "stop", not named."""
        return self.resolve_finish_reason(finish_reason, bool(state.get("ts")))

    def resolve_finish_reason(self, finish_reason: str | None, tool_calls_made: bool) -> str:
        """vLLM's `resolve_finish_reason` (non-streaming: pass whether the message has calls)."""
        finish_reason = finish_reason or "stop"
        if tool_calls_made and finish_reason == "stop" and self.choice != "named":
            return "tool_calls"
        return finish_reason

    def _delta(self, state: dict[str, Any], reasoning: str, content: str,
               calls: list[ToolCallDelta]) -> dict[str, Any] | None:
        if not self.include_reasoning:
            reasoning = ""
        if calls:
            if not self.keeps_calls:
                calls = []
            elif not self.parallel:
                calls = [c for c in calls if c["index"] == 0]
        if calls:
            state["ts"] = True
            for call in calls:
                if "type" in call:
                    call["type"] = "function"
                    if call.get("id") is None:
                        call["id"] = self._call_id(state, call["index"])
        if not reasoning and not content and not calls:
            return None
        return {"reasoning": reasoning or None, "content": content or None, "tool_calls": calls}

    def _call_id(self, state: dict[str, Any], index: int) -> str:
        digest = hashlib.blake2b(f"{state['seed']}:{index}".encode(), digest_size=8).hexdigest()
        return f"chatcmpl-tool-{digest}"

    def _tool_phase(self, state: dict[str, Any], content: str, token_ids: Sequence[int],
                    final: bool) -> tuple[str, list[ToolCallDelta]]:
        mode = self.mode
        if mode == "plain":
            return content, []
        if mode == "named":
            return self._named(state, content, final)
        if mode == "required":
            return self._required(state, content, final)
        tstate = state["t"]
        unified = self.tools.unified
        if not state["inw"] and content.strip():
            state["inw"] = True  # the family got more than whitespace (vLLM's forced rule looks at that)
        text, calls = self.tools.feed(tstate, content, token_ids) if content or unified else ("", [])
        if final:
            tail, more = self.tools.finish(tstate)
            text += tail
            calls = calls + more
            if self.tools.tools_called(tstate):
                state["fc"] = True
        if unified:
            return text, calls
        return self._hold_leading_whitespace(state, text, calls, final), calls

    def _hold_leading_whitespace(self, state: dict[str, Any], text: str, calls: list, final: bool) -> str:
        """vLLM drops whitespace-only content when tools are called: hold it until we know.

        While every content character so far is whitespace (`str.strip()`'s notion, as vLLM's
        check), it is held; the first other character releases it; at the end it is dropped
        if the family found a call, or the choice was forced and the family got nothing but
        whitespace, else sent.
        """
        if calls:
            state["fc"] = True
        if state["nw"] or (not text and not final):
            return text
        if text.strip():
            held, state["ws"] = state["ws"], ""
            state["nw"] = True
            return held + text
        state["ws"] += text
        if final:
            held, state["ws"] = state["ws"], ""
            return "" if (state.get("fc") or (self.forced_blank and not state["inw"])) else held
        return ""

    def _named(self, state: dict[str, Any], content: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        """Named tool choice: the content *is* the arguments, sent raw (as vLLM does)."""
        tstate = state["t"]
        if tstate["hdr"]:
            return "", ([{"index": 0, "function": {"arguments": content}}] if content else [])
        state["ws"] += content
        if not state["ws"].strip():  # (str.strip's whitespace, as the non-streaming rule: U+00A0 too)
            if final:
                state["ws"] = ""
            return "", []
        tstate["hdr"] = True
        args, state["ws"] = state["ws"], ""
        return "", [{"index": 0, "id": None, "type": "function",
                     "function": {"name": self.named, "arguments": args}}]

    def _required(self, state: dict[str, Any], content: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        """tool_choice=required: a JSON list of {"name", "parameters"}, streamed call by call."""
        tstate = state["t"]
        out: list[ToolCallDelta] = []
        js = tstate["js"]
        if content and not (js["done"] or js["err"]):
            scanner = JsonScanner(js)
            scanner.feed(content)
            self._required_events(tstate, scanner.events, out)
        return "", out

    def _required_events(self, tstate: dict[str, Any], events: list[tuple], out: list[ToolCallDelta]) -> None:
        for ev in events:
            kind = ev[0]
            cur = tstate["cur"]
            if kind == "start" and ev[1] in ("name", "parameters") and cur is None:
                cur = tstate["cur"] = RequiredCall(nm="", hdr=False, pa="", p=False)
            if cur is None:
                continue
            if kind == "start" and ev[1] == "parameters":
                cur["p"] = True
            elif kind == "frag" and ev[1] == "name":
                cur["nm"] += ev[2]
            elif kind == "frag" and ev[1] == "parameters":
                if cur["hdr"]:
                    out.append({"index": tstate["n"], "function": {"arguments": ev[2]}})
                else:
                    cur["pa"] += ev[2]
            elif kind == "end" and ev[1] == "name" and not cur["hdr"]:
                with contextlib.suppress(ValueError):
                    name = json.loads(cur["nm"])
                    if isinstance(name, str):
                        name = escape_lone_surrogates(name)
                        cur["hdr"] = True
                        out.append({"index": tstate["n"], "id": None, "type": "function",
                                    "function": {"name": name, "arguments": cur["pa"]}})
                        cur["pa"] = ""
            elif kind == "obj":
                if cur["hdr"] and not cur["p"]:
                    out.append({"index": tstate["n"], "function": {"arguments": "null"}})
                if cur["hdr"]:
                    tstate["n"] += 1
                tstate["cur"] = None

    # -- non-streaming ----------------------------------------------------------------------

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None, list[dict]]:
        """(reasoning, content, tool_calls) exactly as vLLM 0.33's non-streaming derender."""
        repeat = ""
        if self.reasoning is not None:
            reasoning, content, repeat = self.reasoning.split_complete(text, token_ids, prompt_token_ids)
        else:
            reasoning, content = None, text
        calls, content = self._extract_tool_calls(content, token_ids)
        if repeat:  # what the stream sends again at its end, after the tool parser (README)
            content = (content or "") + repeat
        if not self.include_reasoning:
            reasoning = None
        if not self.keeps_calls:
            return reasoning, content, []
        if self.forced:
            content = content or ""
        calls = calls or []
        if not self.parallel:
            calls = calls[:1]
        seed = secrets.token_hex(8)
        out = []
        for index, call in enumerate(calls):
            call_id = call.get("id") or self._call_id({"seed": seed}, index)
            out.append({"id": call_id, "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]}})
        return reasoning, content, out

    def _extract_tool_calls(self, content: str | None, token_ids: Sequence[int]
                            ) -> tuple[list[dict] | None, str | None]:
        mode = self.mode
        if self.tools is None or mode == "plain":
            return [], content
        if self.choice == "none":  # engine-based composition: the markup is still stripped
            _, rest = self.tools.extract_complete(content or "", token_ids)
            return [], rest
        if mode == "named":
            if content is None or not content.strip():
                return [], None
            return [{"id": None, "name": self.named, "arguments": content}], None
        if mode == "required":
            parsed: list[_FunctionDefinition] = []
            with contextlib.suppress(ValidationError, ValueError):
                parsed = _REQUIRED_LIST.validate_json(content or "")
            return [{"id": None, "name": escape_lone_surrogates(d.name), "arguments": dumps(d.parameters)}
                    for d in parsed], None
        calls, rest = self.tools.extract_complete(content if content is not None else "", token_ids)
        if self.tools.unified:
            return calls, rest
        if calls is not None:  # vLLM's tools_called (possibly with no complete call)
            if rest and rest.strip() == "":
                rest = None
            return calls, rest
        if self.forced_blank and (content is None or not content.strip()):
            return [], None
        if self.engine_based:
            return None, rest or None
        if self.tools.engine_based and content:
            # classic composition: the text as written (`rest` too), or past the stream's hold
            # bound the engine's content (core/parsers/engine_parsers.py, MAX_RAW_HOLD). Content
            # that is only whitespace went out as it came unless the grammar holds whitespace back
            # (then neither sends it): written as it came, as vLLM's answer has it
            holds = getattr(getattr(self.tools, "grammar", None), "strip_content_whitespace_with_tools", False)
            if not content.strip() and not (rest or "").strip() and not holds:
                return None, content
            return None, rest
        return None, content
