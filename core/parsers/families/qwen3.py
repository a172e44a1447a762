"""qwen3 reasoning and qwen3_xml / qwen3_coder tool calls: vLLM 0.33's Qwen3 parser engine.

    <think>...</think>
    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

The grammar is vLLM's `qwen3_config` (vllm/parser/qwen3.py); everything else follows from the
engine (core/parsers/engine.py, engine_parsers.py): `<tool_call>` also ends reasoning, a bare
`<function=` starts a call, a repeated `</think>` in content is dropped, other special tokens'
text is dropped everywhere. The arguments are vLLM's `_qwen3_arg_converter`: every
`<parameter=KEY>VALUE</parameter>` (or VALUE up to the next `<parameter=`) in order, one leading
and one trailing newline trimmed, a repeated key keeping its first place and last value, a value
never closed dropped; then the tool schema's types (core/parsers/coercion.py).

With `enable_thinking: false` vLLM's reasoning parser returns the output untouched.
"""

from __future__ import annotations

import re
from typing import Any

import regex

from core.parsers.base import ParserContext
from core.parsers.coercion import coerce, schema_types, string_only, tool_properties
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import ArgStreamer, CallState, EngineReasoningParser, EngineToolParser
from core.parsers.jsonstream import dumps, dumps_str_body
from core.parsers.structural_tag import THINK_EXCLUDES, TagModel, apply_tag_keeping_markers

THINK_START, THINK_END = "<think>", "</think>"
TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"
TURN_BOUNDARIES = ("<|im_start|>", "<|im_end|>")

C, R, P, N, A, B = Phase.CONTENT, Phase.REASONING, Phase.PREAMBLE, Phase.NAME, Phase.ARGS, Phase.BETWEEN


def qwen3_grammar(initial: str, name: str = "qwen3", strip_reasoning: bool = False, *,
                  think: tuple[str, str] = (THINK_START, THINK_END),
                  tool: tuple[str, str] = (TOOL_START, TOOL_END)) -> Grammar:
    """vLLM's `qwen3_config` (also the base of step3p5 and nemotron_v3, which strip the reasoning,
    and of seed_oss, which spells the think and tool-call wrappers differently: `think` and `tool`
    are the (start, end) literals; the function and parameter tags are the same in every variant)."""
    return Grammar(
        name=name, initial=initial,
        terminals={"THINK_START": think[0], "THINK_END": think[1], "TOOL_START": tool[0],
                   "TOOL_END": tool[1], "FUNC_PREFIX": FUNC, "FUNC_END": FUNC_END, "PARAM_START": PARAM,
                   "PARAM_END": PARAM_END, "CLOSE_ANGLE": ">"},
        id_terminals=frozenset({*think, *tool}),
        transitions={
            (R, "THINK_START"): (R, ()),
            (R, "THINK_END"): (C, (Ev.REASONING_END,)),
            (C, "THINK_END"): (C, ()),  # a repeated </think> is dropped
            (R, "TOOL_START"): (P, (Ev.REASONING_END, Ev.CALL_START)),
            (C, "TOOL_START"): (P, (Ev.REASONING_END, Ev.CALL_START)),
            (C, "FUNC_PREFIX"): (N, (Ev.CALL_START,)),
            (P, "TOOL_END"): (C, (Ev.CALL_END,)),
            (P, "FUNC_PREFIX"): (N, ()),
            (N, "CLOSE_ANGLE"): (A, ()),
            (N, "FUNC_END"): (B, (Ev.CALL_END,)),
            (N, "TOOL_END"): (C, (Ev.CALL_END,)),
            (N, "TOOL_START"): (P, (Ev.CALL_END, Ev.CALL_START)),
            (N, "FUNC_PREFIX"): (N, (Ev.CALL_END, Ev.CALL_START)),
            (A, "FUNC_END"): (B, (Ev.CALL_END,)),
            (A, "FUNC_PREFIX"): (N, (Ev.CALL_END, Ev.CALL_START)),
            (A, "PARAM_START"): (A, (Ev.ARGS,)),
            (A, "PARAM_END"): (A, (Ev.ARGS,)),
            (B, "TOOL_END"): (C, ()),
            (B, "TOOL_START"): (P, (Ev.CALL_START,)),
            (B, "FUNC_PREFIX"): (N, (Ev.CALL_START,)),
        },
        strip_trailing_reasoning_whitespace=strip_reasoning)


QWEN3 = qwen3_grammar(R)
QWEN3_NO_THINKING = qwen3_grammar(C)


class Qwen3ReasoningParser(EngineReasoningParser):
    name = "qwen3"
    GRAMMAR = QWEN3
    GRAMMAR_NO_THINKING = QWEN3_NO_THINKING
    BOUNDARIES = TURN_BOUNDARIES

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return bool(ctx.chat_template_kwargs.get("enable_thinking", True))


# -- arguments ------------------------------------------------------------------------------

_PARAM_RE = re.compile(r"<\s*parameter\s*=\s*([^>]*)>(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s*=))",
                       re.DOTALL)
_PARAM_HEAD = regex.compile(r"<\s*parameter\s*=\s*([^>]*)>", regex.DOTALL)
_VALUE_END = regex.compile(r"<\s*/\s*parameter\s*>|<\s*parameter\s*=")


def _trim(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def qwen3_arguments(raw: str) -> str:
    """vLLM's `_qwen3_arg_converter` on a complete call."""
    params: dict[str, Any] = {}
    for m in _PARAM_RE.finditer(raw):
        params[m.group(1)] = _trim(m.group(2))
    return dumps(params)


def value_json(value: str, prop: Any) -> str:
    """A complete parameter value as it ends up in the arguments (schema types applied)."""
    if isinstance(prop, dict):
        return dumps(coerce(value, schema_types(prop)))
    return dumps(value)


class XmlArgStreamer(ArgStreamer):
    """Parameters in tag markup, streamed as the JSON the converter will build: a string value
    character by character, other values once complete (their type is known then). Holds back
    whatever may still be a value's end; stops at a repeated key (the answer keeps the first
    place with the last value, which a stream cannot)."""

    HEAD: regex.Pattern  # a parameter's head; group 1 the key, the value starts at its end
    REPEATS_KEPT = False  # whether a repeated key is streamed too (MiniMax: the answer keeps both)

    def key_of(self, match: regex.Match) -> str:
        return match.group(1)

    def value_end(self, raw: str, start: int) -> tuple[int, int, bool]:
        """(end of the value, where the next parameter may start, complete) from `start`."""
        raise NotImplementedError

    def trim(self, value: str) -> str:
        return value

    def kept(self, key: str) -> bool:
        """Whether the converter keeps a parameter of this key (MiniMax drops empty names)."""
        return True

    def unstable(self, match: regex.Match) -> bool:
        """Whether later text may still re-read this complete head as another one (then the
        call's arguments go out when it ends)."""
        return False

    def start(self, parser: EngineToolParser, call: CallState) -> dict[str, Any] | None:
        # pos: where to look for the next parameter; k: key of the open value; vs: its start;
        # ep: value characters streamed up to here; keys: keys streamed (a repeat stops the stream)
        return {"pos": 0, "k": None, "vs": 0, "ep": 0, "str": False, "keys": [], "opened": False, "stop": False}

    def feed(self, parser: EngineToolParser, call: CallState, text: str) -> str:
        st = call["a"]
        if st is None or st["stop"]:
            return ""
        raw = call["ra"]
        out: list[str] = []
        props = tool_properties(parser.ctx.tools, call["nm"].strip()) if parser.ctx.tools else {}
        while True:
            if st["k"] is None:
                m = self.HEAD.search(raw, st["pos"], partial=True)
                if m is None:
                    st["pos"] = len(raw)
                    break
                if m.partial:
                    st["pos"] = m.start()
                    break
                key = self.key_of(m)
                if (key in st["keys"] and not self.REPEATS_KEPT) or self.unstable(m):
                    st["stop"] = True
                    break
                st.update(k=key, vs=m.end(), ep=m.end(), pos=m.end())
                prop = props.get(key)
                st["str"] = self.kept(key) and (not isinstance(prop, dict) or string_only(prop))
                if st["str"]:
                    out.append(self._key_prefix(st, key) + '"')
            end, nxt, complete = self.value_end(raw, st["ep"])
            if not complete:
                if st["str"]:
                    out.append(self._stream_value(st, raw, end))
                else:
                    st["ep"] = end  # nothing streams; look for the end from here next time
                break
            value = self.trim(raw[st["vs"]:end])
            if st["str"]:
                out.append(dumps_str_body(value[self._streamed(st, raw):]) + '"')
            elif self.kept(st["k"]):
                out.append(self._key_prefix(st, st["k"]) + value_json(value, props.get(st["k"])))
            if self.kept(st["k"]):
                st["keys"].append(st["k"])
            st.update(k=None, pos=nxt)
        return "".join(out)

    @staticmethod
    def _key_prefix(st: dict[str, Any], key: str) -> str:
        opening = "{" if not st["opened"] else ", "
        st["opened"] = True
        return opening + dumps(key) + ": "

    def _stream_value(self, st: dict[str, Any], raw: str, end: int) -> str:
        """The open string value's characters that are certain, up to `end`."""
        piece = raw[st["ep"]:end]
        st["ep"] = end
        return dumps_str_body(piece)

    def _streamed(self, st: dict[str, Any], raw: str) -> int:
        """How many characters of the (trimmed) value were streamed."""
        return st["ep"] - st["vs"]


class Qwen3ArgStreamer(XmlArgStreamer):
    HEAD = _PARAM_HEAD

    def value_end(self, raw: str, start: int) -> tuple[int, int, bool]:
        m = _VALUE_END.search(raw, start, partial=True)
        if m is None:
            return len(raw), len(raw), False
        if m.partial:
            return m.start(), m.start(), False
        # a closing tag is consumed; a next parameter's head is not (it starts the next one)
        closing = not m.group().lstrip("<").lstrip().startswith("parameter")
        return m.start(), (m.end() if closing else m.start()), True

    def trim(self, value: str) -> str:
        return _trim(value)

    def _stream_value(self, st: dict[str, Any], raw: str, end: int) -> str:
        ep = st["ep"]
        if ep == st["vs"]:
            if end == ep:
                return ""
            if raw[ep] == "\n":  # one leading newline is not part of the value
                ep += 1
        piece = raw[ep:end]
        if piece.endswith("\n"):  # nor is one trailing newline: hold it until more follows
            piece = piece[:-1]
        st["ep"] = ep + len(piece)
        return dumps_str_body(piece)

    def _streamed(self, st: dict[str, Any], raw: str) -> int:
        lead = 1 if st["ep"] > st["vs"] and raw[st["vs"]] == "\n" else 0
        return st["ep"] - st["vs"] - lead


class Qwen3XmlToolParser(EngineToolParser):
    name = "qwen3_xml"
    GRAMMAR = QWEN3
    STREAMER = Qwen3ArgStreamer()
    TAG_MODEL = TagModel([("<tool_call>\n<function={name}>\n", "\n</function>\n</tool_call>")],
                         ["<tool_call>\n<function="], style="qwen_xml", excludes=THINK_EXCLUDES,
                         required_triggered=True)

    def adjust_request(self, request: Any) -> Any:
        return apply_tag_keeping_markers(request, self.TAG_MODEL)

    def convert_args(self, raw: str, name: str) -> str:
        return qwen3_arguments(raw)
