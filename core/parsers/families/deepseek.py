"""deepseek_v3 and deepseek_v31 tool calls: special-token envelopes, arguments passed through raw.

    v3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
    v31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>

vLLM's non-streaming rule (`extract_complete`, exact): with `<｜tool▁calls▁begin｜>` in the text,
every complete call envelope found by its regex is a call whose arguments are the raw text
(no JSON re-serialization), and content is the text before the block (v3 adds the text after
the last `<｜tool▁calls▁end｜>`). Incomplete envelopes are not calls.

Streaming: a small phase machine over the markers. The name goes out when the header is
complete, then the raw arguments stream as generated, holding back only a possible start of
the closing marker. An envelope cut off by the end of output cannot be taken back (vLLM's
stream sends it too); the non-streaming answer drops it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.registry import register_tool
from core.parsers.structural_tag import THINK_EXCLUDES, TagModel, apply_structural_tag
from core.parsers.text import find_first, merge_tool_deltas, partial_suffix

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"


class _DeepSeekToolParser(ToolParser):
    supports_required_and_named = False
    HEADER_END: str  # what ends the header (after it, arguments start)
    ARGS_END: str  # what ends the arguments
    CONTENT_AFTER_BLOCK = False
    TAG_MODEL: TagModel

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        if tok.token_to_id(CALLS_BEGIN) is None or tok.token_to_id(CALLS_END) is None:
            raise ValueError(f"{self.name} tool parser could not locate tool call start/end tokens in the tokenizer!")

    def adjust_request(self, request: Any) -> Any:
        return apply_structural_tag(request, self.TAG_MODEL)

    def parse_header(self, header: str) -> str | None:
        """The function name from the text between CALL_BEGIN and HEADER_END, or None if no match."""
        raise NotImplementedError

    # -- streaming --------------------------------------------------------------------------

    def start(self) -> State:
        # ph: T content, B inside the block, N header, A arguments, E after the block
        return {"ph": "T", "h": "", "n": 0, "hd": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        content: list[str] = []
        out: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            if ph in ("T", "E"):
                at = buf.find(CALLS_BEGIN, pos)
                end = at if at != -1 else len(buf) - partial_suffix(buf[pos:], (CALLS_BEGIN,))
                if ph == "T" or self.CONTENT_AFTER_BLOCK:
                    content.append(buf[pos:end])
                if at == -1:
                    state["h"] = buf[end:]
                    break
                state["ph"] = "B"
                pos = at + len(CALLS_BEGIN)
            elif ph == "B":
                at, tag = find_first(buf, (CALL_BEGIN, CALLS_END), pos)
                if tag is None:
                    keep = partial_suffix(buf[pos:], (CALL_BEGIN, CALLS_END))
                    state["h"] = buf[len(buf) - keep:]
                    break
                pos = at + len(tag)
                if tag == CALL_BEGIN:
                    state["ph"] = "N"
                    state["hd"] = ""
                else:
                    state["ph"] = "E"
            elif ph == "N":
                at = buf.find(self.HEADER_END, pos)
                if at == -1:
                    keep = partial_suffix(buf[pos:], (self.HEADER_END,))
                    state["hd"] += buf[pos:len(buf) - keep]
                    state["h"] = buf[len(buf) - keep:]
                    if len(state["hd"]) > 4096 or "\n" in state["hd"].replace(self.HEADER_END, ""):
                        state["ph"] = "B"  # not a header this family's regex accepts
                    break
                header = state["hd"] + buf[pos:at]
                pos = at + len(self.HEADER_END)
                name = self.parse_header(header)
                state["hd"] = ""
                if name is None:
                    state["ph"] = "B"
                    continue
                out.append({"index": state["n"], "id": None, "type": "function",
                            "function": {"name": name, "arguments": ""}})
                state["ph"] = "A"
            else:  # arguments, raw
                at = buf.find(self.ARGS_END, pos)
                end = at if at != -1 else len(buf) - partial_suffix(buf[pos:], (self.ARGS_END,))
                if end > pos:
                    out.append({"index": state["n"], "function": {"arguments": buf[pos:end]}})
                if at == -1:
                    state["h"] = buf[end:]
                    break
                pos = at + len(self.ARGS_END)
                state["n"] += 1
                state["ph"] = "B"
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        out: list[ToolCallDelta] = []
        content = ""
        ph = state["ph"]
        if ph == "T" or (ph == "E" and self.CONTENT_AFTER_BLOCK):
            content = held
        elif ph == "A" and held:
            out.append({"index": state["n"], "function": {"arguments": held}})
        return content, out



V3_CALL = re.compile(re.escape(CALL_BEGIN) + r"(?P<type>.*)" + re.escape(SEP)
                     + r"(?P<name>.*)\n```json\n(?P<args>[\s\S]*?)\n```" + re.escape(CALL_END))
V31_CALL = re.compile(re.escape(CALL_BEGIN) + r"(?P<name>.*?)" + re.escape(SEP) + r"(?P<args>[\s\S]*?)"
                      + re.escape(CALL_END))


@register_tool("deepseek_v3")
class DeepSeekV3ToolParser(_DeepSeekToolParser):
    name = "deepseek_v3"
    HEADER_END = "\n```json\n"
    ARGS_END = "\n```" + CALL_END
    CONTENT_AFTER_BLOCK = True
    TAG_MODEL = TagModel([(CALL_BEGIN + "function" + SEP + "{name}\n```json\n", "\n```" + CALL_END)], [CALLS_BEGIN],
                         excludes=THINK_EXCLUDES, separator="\n", wrapper=(CALLS_BEGIN, CALLS_END))

    def parse_header(self, header: str) -> str | None:
        if SEP not in header or "\n" in header:
            return None
        kind, _, name = header.rpartition(SEP)
        return name if kind == "function" else None

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if CALLS_BEGIN not in text:
            return None, text
        calls = []
        for m in V3_CALL.finditer(text):
            if m.group("type") != "function":
                return None, text  # vLLM: a ToolCall of another type fails validation
            calls.append({"id": None, "name": m.group("name"), "arguments": m.group("args")})
        content = text[:text.find(CALLS_BEGIN)]
        end = text.rfind(CALLS_END)
        if end != -1:
            content += text[end + len(CALLS_END):]
        return calls, content or None


@register_tool("deepseek_v31")
class DeepSeekV31ToolParser(_DeepSeekToolParser):
    name = "deepseek_v31"
    HEADER_END = SEP
    ARGS_END = CALL_END
    TAG_MODEL = TagModel([(CALL_BEGIN + "{name}" + SEP, CALL_END)], [CALLS_BEGIN],
                         excludes=THINK_EXCLUDES, separator="", wrapper=(CALLS_BEGIN, CALLS_END))

    def parse_header(self, header: str) -> str | None:
        return None if "\n" in header else header

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if CALLS_BEGIN not in text:
            return None, text
        calls = [{"id": None, "name": m.group("name"), "arguments": m.group("args")} for m in V31_CALL.finditer(text)]
        content = text[:text.find(CALLS_BEGIN)]
        return calls, content or None
