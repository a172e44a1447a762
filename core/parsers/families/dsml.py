"""DeepSeek V3.2 / V4 / V4.1 tool calls (DSML) and V4 / V4.1 reasoning: vLLM 0.33's DeepSeek parser engines.

    <think>...</think>                        (V4, V4.1)
    <｜DSML｜tool_calls>                      (V3.2: function_calls; V4.1: "<｜DSML｜ calls>")
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">杭州</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

The grammars are vLLM's `deepseek_v32_config`, `deepseek_v4_config` and `deepseek_v41_config`
(vllm/parser/deepseek_v32.py, deepseek_v4.py, deepseek_v41.py); everything else follows from the
engine (core/parsers/engine.py, engine_parsers.py):
* content is the text before the block, kept as is (no strip; whitespace-only content before a
  call is dropped); a bare invoke starts a call too; after a block the grammar stays in the tool
  block, so text after it is dropped, but a further block or invoke is parsed;
* V4's block opener has two more spellings seen in production (`<｜DSML｜toolcalls>`, `<｜DSML｜tool>`);
* a call is its invoke's name (not checked against the tools) and the JSON object of its complete
  parameters (vLLM's `_dsml_arg_converter`): `string="true"` values are the raw text, others
  `json.loads`-ed when they parse (the text otherwise); a parameter ends at its closing tag or
  where the next one starts; an unclosed last parameter is dropped; a single `arguments` / `input`
  wrapper around the tool's own properties is unwrapped; then the schema's types apply
  (core/parsers/coercion.py). An invoke cut off by the end of the output is still a call;
* V4 / V4.1 reasoning: `<think>...</think>`, thinking unless `thinking` / `enable_thinking` say
  otherwise or `reasoning_effort` is "none" (then the output starts in content, where a `<think>`
  still opens reasoning); the block opener ends reasoning; a stray `</think>` in content is
  dropped; the reasoning is right-stripped. V3.2 reasons with `deepseek_v3` (think.py): vLLM then
  composes the classic way (an output without a call keeps its markup as content).

Streaming: the name goes out with the first argument text, each parameter once it is complete
(the arguments' JSON grows parameter by parameter, with the schema's types), `}` with the
invoke's end; the state holds the current parameter's raw text at most. A call whose first
parameter may be a wrapper to unwrap is held until the next parameter or its end. Two parameters
of one name are both kept, streaming and not (vLLM's answer keeps the last in the first's place).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from core.parsers.base import ParserContext
from core.parsers.coercion import coerced, fix_arg_types, tool_properties
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import ArgStreamer, CallState, EngineReasoningParser, EngineToolParser
from core.parsers.jsonstream import dumps
from core.parsers.structural_tag import TagModel, apply_structural_tag

THINK_START, THINK_END = "<think>", "</think>"
_D = "｜DSML｜"

C, R, P, N, A, B = Phase.CONTENT, Phase.REASONING, Phase.PREAMBLE, Phase.NAME, Phase.ARGS, Phase.BETWEEN


class Spelling:
    """One dialect's literals."""

    def __init__(self, name: str, block: str, starts: tuple[str, ...], sp: str, tag_model: str,
                 style: str = "deepseek_xml") -> None:
        self.name = name
        self.starts = starts  # block openers (the first is the canonical one)
        self.end = f"</{_D}{block}>"
        self.invoke = f'<{_D}{sp}invoke name="'
        self.name_end = '">'
        self.invoke_end = f"</{_D}{sp}invoke>"
        self.param_start = f"<{_D}{sp}parameter"
        self.param_close = f"</{_D}{sp}parameter>"
        start, close = re.escape(self.param_start), re.escape(self.param_close)
        self.head = re.compile(rf'{start}\s+name="([^"]+)"(?:\s+string="([^"]*)")?\s*>')
        self.next_param = re.compile(rf"{start}\s+name=")
        self.param = re.compile(self.head.pattern + rf"(.*?)(?:{close}|(?={start}\s+name=))", re.DOTALL)
        self.tag_model = tag_model
        self.style = style  # xgrammar's JSON style for the arguments in the structural tag


V32 = Spelling("deepseek_v32", "function_calls", (f"<{_D}function_calls>",), "", "deepseek_v3_2")
V4 = Spelling("deepseek_v4", "tool_calls", (f"<{_D}tool_calls>", f"<{_D}toolcalls>", f"<{_D}tool>"), "",
              "deepseek_v4")
V41 = Spelling("deepseek_v41", " calls", (f"<{_D} calls>",), " ", "deepseek_v4_1", style="deepseek_v4_1_xml")


def dsml_grammar(sp: Spelling, thinking: bool | None) -> Grammar:
    """vLLM's config for one dialect; `thinking` None: V3.2's, without reasoning terminals."""
    terminals: dict[str, str | tuple[str, ...]] = {
        "TOOL_START": sp.starts if len(sp.starts) > 1 else sp.starts[0], "TOOL_END": sp.end,
        "INVOKE_PREFIX": sp.invoke, "INVOKE_NAME_END": sp.name_end, "INVOKE_END": sp.invoke_end,
        "PARAM_START": sp.param_start, "PARAM_CLOSE": sp.param_close}
    transitions = {
        (C, "TOOL_START"): (P, ()),
        (P, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (C, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (N, "INVOKE_NAME_END"): (A, ()),
        (A, "INVOKE_END"): (B, (Ev.CALL_END,)),
        (A, "TOOL_END"): (B, (Ev.CALL_END,)),
        (B, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (B, "TOOL_END"): (B, ()),  # a tool call ends the turn: text after the block is dropped
        (B, "TOOL_START"): (P, ()),
    }
    id_terminals = {sp.starts[0], sp.end}
    if thinking is not None:
        terminals.update(THINK_START=THINK_START, THINK_END=THINK_END)
        transitions.update({
            (C, "THINK_START"): (R, (Ev.REASONING_START,)),
            (C, "THINK_END"): (C, ()),  # a stray </think> is dropped
            (R, "THINK_START"): (R, ()),
            (R, "THINK_END"): (C, (Ev.REASONING_END,)),
            (R, "TOOL_START"): (P, (Ev.REASONING_END,)),
        })
        id_terminals |= {THINK_START, THINK_END}
    return Grammar(name=sp.name, terminals=terminals, transitions=transitions,
                   initial=R if thinking else C, wait_for_reasoning=bool(thinking),
                   id_terminals=frozenset(id_terminals), strip_content_whitespace_with_tools=False)


V32_GRAMMAR = dsml_grammar(V32, None)
V4_THINKING, V4_NO_THINKING = dsml_grammar(V4, True), dsml_grammar(V4, False)
V41_THINKING, V41_NO_THINKING = dsml_grammar(V41, True), dsml_grammar(V41, False)


# -- arguments -----------------------------------------------------------------------------


def param_value(is_str: str | None, raw: str) -> Any:
    if is_str == "true":
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


WRAPPERS = ("arguments", "input")


def unwrap(args: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any] | None:
    """vLLM's `_unwrap_wrapper_args`: the inner object of a single `arguments` / `input` key
    that wraps the tool's own properties, else None."""
    if not properties:
        return None
    for wrapper in WRAPPERS:
        if set(args) != {wrapper} or wrapper in properties:
            continue
        inner = args[wrapper]
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except (ValueError, RecursionError):
                return None
        if isinstance(inner, dict) and set(inner).issubset(properties):
            return inner
    return None


def dsml_arguments(sp: Spelling, raw: str, properties: dict[str, Any]) -> str:
    """vLLM's arguments of a complete invoke: its complete parameters, then the wrapper rule.

    A parameter name written twice keeps both, in the order written (each value typed by the
    schema), as the stream sends them: a JSON reader then keeps the last value, as vLLM's answer
    does, but nothing the stream already sent is taken back (README, "vLLM 0.33 bugs")."""
    found = [(m.group(1), param_value(m.group(2), m.group(3))) for m in sp.param.finditer(raw)]
    params = dict(found)
    if len(params) < len(found):
        return "{" + ", ".join(dumps(key) + ": " + dumps(coerced(value, properties.get(key)))
                               for key, value in found) + "}"
    inner = unwrap(params, properties)
    return dumps(params if inner is None else inner)


class DsmlArgStreamer(ArgStreamer):
    """Each parameter goes out once complete, as the JSON the converter and the schema's types
    make of it; the state keeps only the text from the current parameter's head on.

    State: "b" raw text not consumed yet, "s" where the search for the value's end resumes,
    "n" parameters sent, "w" a held first parameter that may be a wrapper (or None).
    """

    keeps_raw = False

    def __init__(self, sp: Spelling) -> None:
        self.sp = sp

    def start(self, parser: EngineToolParser, call: CallState) -> dict[str, Any] | None:
        return {"b": "", "s": 0, "n": 0, "w": None}

    def feed(self, parser: EngineToolParser, call: CallState, text: str) -> str:
        st, sp = call["a"], self.sp
        st["b"] += text
        props = tool_properties(parser.ctx.tools, call["nm"].strip())
        out = []
        while True:
            buf = st["b"]
            m = sp.head.search(buf)
            if m is None:  # keep only what may still become a parameter head
                at = buf.rfind("<")
                st["b"], st["s"] = (buf[at:] if at != -1 and sp.param_start.startswith(buf[at:at + len(sp.param_start)])
                                    else ""), 0
                break
            if m.start() > 0:
                st["b"], st["s"] = buf[m.start():], max(0, st["s"] - m.start())
                continue
            scan = max(m.end(), st["s"])
            close = buf.find(sp.param_close, scan)
            nxt = sp.next_param.search(buf, scan)
            ends = [e for e in ((close, close + len(sp.param_close)) if close != -1 else None,
                                (nxt.start(), nxt.start()) if nxt is not None else None) if e is not None]
            if not ends:
                # the value goes on; both of its ends start with the only "<" they hold: resume at the last one
                at = buf.rfind("<", scan)
                st["s"] = at if at != -1 else len(buf)
                break
            value_end, consumed = min(ends)
            st["b"], st["s"] = buf[consumed:], 0
            out.append(self._param(st, [m.group(1), m.group(2), buf[m.end():value_end]], props))
        return "".join(out)

    def _param(self, st: dict[str, Any], param: list[Any], props: dict[str, Any], hold: bool = True) -> str:
        """`param`: [key, string attribute, raw value] (kept raw while held: the state is JSON)."""
        if st["w"] is not None:  # a second parameter: the held one was no wrapper
            held, st["w"] = st["w"], None
            return self._param(st, held, props, hold=False) + self._param(st, param, props)
        key, is_str, raw = param
        if hold and st["n"] == 0 and key in WRAPPERS and props and key not in props:
            st["w"] = param
            return ""
        piece = (("{" if st["n"] == 0 else ", ") + dumps(key) + ": "
                 + dumps(coerced(param_value(is_str, raw), props.get(key))))
        st["n"] += 1
        return piece

    def finish(self, parser: EngineToolParser, call: CallState) -> str:
        st = call["a"]
        name = call["nm"].strip()
        if st["w"] is not None:
            held, st["w"] = st["w"], None
            props = tool_properties(parser.ctx.tools, name)
            inner = unwrap({held[0]: param_value(held[1], held[2])}, props)
            if inner is not None:
                return fix_arg_types(dumps(inner), name, parser.ctx.tools)
            return self._param(st, held, props, hold=False) + "}"
        return "}" if st["n"] else "{}"


# -- the tool parsers ----------------------------------------------------------------------


class DsmlTagModel(TagModel):
    """xgrammar's deepseek_v3_2 / deepseek_v4 / deepseek_v4_1 builtin tags."""

    def __init__(self, sp: Spelling) -> None:
        begin = sp.starts[0]
        super().__init__([(sp.invoke + "{name}" + '">\n', sp.invoke_end + "\n")], [begin], style=sp.style,
                         excludes=[THINK_START, THINK_END])
        self.begin, self.end = begin, sp.end

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        tags = self.tags(tools)
        open_block = {"type": "const_string", "value": "\n\n" + self.begin + "\n"}
        close_block = {"type": "const_string", "value": self.end}
        if named:
            return {"type": "sequence", "elements": [open_block, tags[0], close_block]}
        calls = {"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True,
                 "stop_after_first": False}
        if required:
            return {"type": "sequence", "elements": [open_block, calls, close_block]}
        return {"type": "triggered_tags", "triggers": [self.begin],
                "tags": [{"type": "tag", "begin": self.begin + "\n", "content": calls, "end": self.end}],
                "at_least_one": False, "stop_after_first": False, "excludes": list(self.excludes)}


class _DsmlToolParser(EngineToolParser):
    SPELLING: ClassVar[Spelling]
    supports_required_and_named = False  # forced calls come in DSML too (the structural tag)

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False
        return apply_structural_tag(request, DsmlTagModel(self.SPELLING))

    def convert_args(self, raw: str, name: str) -> str:
        return dsml_arguments(self.SPELLING, raw, tool_properties(self.ctx.tools, name))


class DeepSeekV32ToolParser(_DsmlToolParser):
    name = "deepseek_v32"
    SPELLING = V32
    GRAMMAR = V32_GRAMMAR
    STREAMER = DsmlArgStreamer(V32)


class DeepSeekV4ToolParser(_DsmlToolParser):
    name = "deepseek_v4"
    SPELLING = V4
    GRAMMAR = V4_THINKING  # (the tool pass starts in content either way)
    STREAMER = DsmlArgStreamer(V4)


class DeepSeekV41ToolParser(_DsmlToolParser):
    name = "deepseek_v41"
    SPELLING = V41
    GRAMMAR = V41_THINKING
    STREAMER = DsmlArgStreamer(V41)


# -- reasoning (V4, V4.1) -------------------------------------------------------------------


def thinking_enabled(kwargs: dict[str, Any]) -> bool:
    """vLLM's DeepSeekV4Parser: `thinking` / `enable_thinking` (on when neither is given), off
    with `reasoning_effort` "none"."""
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    return thinking and kwargs.get("reasoning_effort") != "none"


class DeepSeekV4ReasoningParser(EngineReasoningParser):
    name = "deepseek_v4"
    GRAMMAR, GRAMMAR_NO_THINKING = V4_THINKING, V4_NO_THINKING
    PASS_THROUGH_WITHOUT_THINKING = False  # thinking off still reads think tags in the content

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return thinking_enabled(ctx.chat_template_kwargs)


class DeepSeekV41ReasoningParser(DeepSeekV4ReasoningParser):
    name = "deepseek_v41"
    GRAMMAR, GRAMMAR_NO_THINKING = V41_THINKING, V41_NO_THINKING
