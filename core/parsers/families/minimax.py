"""MiniMax M2 (MiniMaxAI/MiniMax-M2; M2.1 / M2.5 write the same format): vLLM 0.33's
`minimax_m2` parser engine and its `minimax_m2_append_think` reasoning parser.

    ...reasoning...</think>                   (the template opens `<think>` in the prompt)
    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Seattle</parameter>
    </invoke>
    </minimax:tool_call>

The grammar is vLLM's `minimax_m2_config` (vllm/parser/minimax_m2.py); the rest follows from the
engine (core/parsers/engine.py, engine_parsers.py):
* reasoning is open from the start; `</think>` or the block opener ends it; a `<think>` in
  reasoning is dropped, one in content is text, a stray `</think>` in content is dropped; the
  reasoning is right-stripped; there is no thinking switch;
* an invoke's name may be written `"name"`, `'name'` or bare (`<invoke name=get_weather>`), each
  closed by `">`, `'>` or `>`; a bare invoke (no block) starts a call too; the name (stripped)
  must be one of the request's tools; text after a call is dropped, while `</minimax:tool_call>`
  goes back to content (a later block or invoke is parsed again);
* the arguments are vLLM's `_minimax_m2_arg_converter`: every `<parameter name=...>VALUE` (name
  quoted either way or bare, stripped; an empty name skipped) ended by `</parameter>` or the next
  `<parameter name=`, the value verbatim, a value never ended dropped; then the tool schema's
  types (core/parsers/coercion.py). A name written twice keeps both, in the order written, streaming
  and not (vLLM: its first place with the last value; README, "vLLM 0.33 bugs we do not follow").

`minimax_m2_append_think` is a classic parser: no reasoning at all, the content is `<think>` +
the whole output (the template's opening tag given back), unless the prompt already closed
reasoning: vLLM's stream then never asks the parser, and our answer, streaming and not, is the
output as it is (vLLM's non-streaming answer does not look at the prompt).

Streaming (the shared XML streamer, core/parsers/families/qwen3.py): a string-typed value goes
out character by character, other values once complete, typed; a parameter whose bare name
starts with a quote may still be re-read as a quoted one, so the call's arguments then go out
when it ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import regex

from core.parsers.base import ParserContext, ReasoningParser, State
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import EngineReasoningParser, EngineToolParser
from core.parsers.coercion import tool_properties
from core.parsers.families.qwen3 import XmlArgStreamer, value_json
from core.parsers.jsonstream import dumps
from core.parsers.structural_tag import THINK_EXCLUDES, TagModel, apply_tag_keeping_markers

THINK_START, THINK_END = "<think>", "</think>"
TOOL_START, TOOL_END = "<minimax:tool_call>", "</minimax:tool_call>"
INVOKE_PREFIXES = ('<invoke name="', "<invoke name='", "<invoke name=")
NAME_ENDS = ('">', "'>", ">")
INVOKE_END = "</invoke>"
PARAM_START, PARAM_END = "<parameter name=", "</parameter>"

C, R, P, N, A, B = Phase.CONTENT, Phase.REASONING, Phase.PREAMBLE, Phase.NAME, Phase.ARGS, Phase.BETWEEN

MINIMAX = Grammar(
    name="minimax_m2", initial=R, wait_for_reasoning=True,
    terminals={"THINK_START": THINK_START, "THINK_END": THINK_END, "TOOL_START": TOOL_START, "TOOL_END": TOOL_END,
               "PARAM_START": PARAM_START, "PARAM_END": PARAM_END, "INVOKE_PREFIX": INVOKE_PREFIXES,
               "INVOKE_END": INVOKE_END, "NAME_END": NAME_ENDS},
    id_terminals=frozenset({THINK_START, THINK_END, TOOL_START, TOOL_END}),
    transitions={
        (R, "THINK_START"): (R, ()),
        (R, "THINK_END"): (C, (Ev.REASONING_END,)),
        (C, "THINK_END"): (C, ()),
        (R, "TOOL_START"): (P, (Ev.REASONING_END,)),
        (C, "TOOL_START"): (P, ()),
        (A, "PARAM_START"): (A, (Ev.ARGS,)),
        (A, "PARAM_END"): (A, (Ev.ARGS,)),
        # the block's end goes back to content (a closer inside the arguments is argument text)
        (P, "TOOL_END"): (C, ()),
        (B, "TOOL_END"): (C, ()),
        (C, "TOOL_END"): (C, ()),
        (A, "INVOKE_END"): (B, (Ev.CALL_END,)),
        (C, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (P, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (B, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (N, "NAME_END"): (A, ()),
    },
    validate_tool_names=True)


class MiniMaxM2ReasoningParser(EngineReasoningParser):
    name = "minimax_m2"
    GRAMMAR = MINIMAX


# -- arguments -------------------------------------------------------------------------------

_HEAD = (r"<\s*parameter\s+name\s*=\s*"
         r"""(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^>\s]+))\s*>""")
_PARAM_RE = regex.compile(_HEAD + r"(?P<value>.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s+name\s*=))",
                          regex.DOTALL)
_PARAM_HEAD = regex.compile(_HEAD, regex.DOTALL)
_VALUE_END = regex.compile(r"<\s*/\s*parameter\s*>|<\s*parameter\s+name\s*=")


def _key(match: regex.Match) -> str:
    return (match.group("dq") or match.group("sq") or match.group("bare") or "").strip()


def minimax_arguments(raw: str, properties: dict[str, Any]) -> str:
    """vLLM's `_minimax_m2_arg_converter` on a complete call, except that a parameter name written
    twice keeps both, in the order written (each value typed by the schema), as the stream sends
    them: a JSON reader keeps the last value, as vLLM's answer does, and nothing the stream sent is
    taken back (README, "vLLM 0.33 bugs")."""
    found = [(key, m.group("value")) for m in _PARAM_RE.finditer(raw) if (key := _key(m))]
    params = dict(found)
    if len(params) < len(found):
        return "{" + ", ".join(dumps(key) + ": " + value_json(value, properties.get(key)) for key, value in found) + "}"
    return dumps(params)


class MiniMaxArgStreamer(XmlArgStreamer):
    HEAD = _PARAM_HEAD
    REPEATS_KEPT = True

    def key_of(self, match: regex.Match) -> str:
        return _key(match)

    def kept(self, key: str) -> bool:
        return bool(key)

    def unstable(self, match: regex.Match) -> bool:
        # `name="a>...`: the bare reading `"a` matches now, a later `"` would make it the quoted one
        bare = match.group("bare")
        return bare is not None and bare[0] in "\"'"

    def value_end(self, raw: str, start: int) -> tuple[int, int, bool]:
        m = _VALUE_END.search(raw, start, partial=True)
        if m is None:
            return len(raw), len(raw), False
        if m.partial:
            return m.start(), m.start(), False
        # a closing tag is consumed; a next parameter's opener is not (it starts the next one)
        closing = "/" in m.group()
        return m.start(), (m.end() if closing else m.start()), True


# -- the tool parser ---------------------------------------------------------------------------

class MiniMaxTagModel(TagModel):
    """vLLM's own "minimax" structural tag (vllm/tool_parsers/structural_tag_registry.py): the
    invokes inside one block, a forced choice opening it on a new line."""

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        calls = {"type": "tags_with_separator", "tags": self.tags(tools), "separator": "", "at_least_one": True,
                 "stop_after_first": named}
        if required or named:
            return {"type": "sequence", "elements": [{"type": "const_string", "value": "\n" + TOOL_START + "\n"},
                                                     calls, {"type": "const_string", "value": TOOL_END}]}
        return {"type": "triggered_tags", "triggers": [TOOL_START],
                "tags": [{"type": "tag", "begin": TOOL_START + "\n", "content": calls, "end": TOOL_END}],
                "at_least_one": False, "stop_after_first": False, "excludes": list(THINK_EXCLUDES)}


class MiniMaxM2ToolParser(EngineToolParser):
    name = "minimax_m2"
    GRAMMAR = MINIMAX
    STREAMER = MiniMaxArgStreamer()
    TAG_MODEL = MiniMaxTagModel([('<invoke name="{name}">\n', INVOKE_END + "\n")], [TOOL_START], style="minimax_xml",
                                excludes=THINK_EXCLUDES)

    def adjust_request(self, request: Any) -> Any:
        return apply_tag_keeping_markers(request, self.TAG_MODEL)

    def convert_args(self, raw: str, name: str) -> str:
        return minimax_arguments(raw, tool_properties(self.ctx.tools, name) if self.ctx.tools else {})


# -- minimax_m2_append_think -------------------------------------------------------------------

class MiniMaxM2AppendThinkReasoningParser(ReasoningParser):
    """Everything is content, `<think>` in front (vLLM's MiniMaxM2AppendThinkReasoningParser).

    State: "p" whether `<think>` is still to be sent (false when the prompt closed reasoning:
    vLLM's stream then passes the output through untouched).
    """

    name = "minimax_m2_append_think"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        self.start_id, self.end_id = tok.token_to_id(THINK_START), tok.token_to_id(THINK_END)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """The last think tag is `</think>` (None ids never match)."""
        for tid in reversed(token_ids):
            if tid in (self.end_id, self.start_id):
                return tid == self.end_id
        return False

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": not (prompt_token_ids and self.is_reasoning_end(prompt_token_ids))}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if state["p"] and (text or token_ids):  # vLLM prefixes the first delta, even an empty one
            state["p"] = False
            return "", THINK_START + text
        return "", text

    def finish(self, state: State) -> tuple[str, str]:
        if state["p"]:  # (an output of no tokens: vLLM's non-streaming answer is still "<think>")
            state["p"] = False
            return "", THINK_START
        return "", ""

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        # the prompt read as the stream reads it (vLLM's extract_reasoning does not read it, its
        # stream does: README, "vLLM 0.33 bugs we do not follow")
        return None, (THINK_START if self.start(prompt_token_ids)["p"] else "") + text
