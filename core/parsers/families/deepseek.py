"""deepseek_v3 and deepseek_v31 tool calls: special-token envelopes, arguments passed through raw.

    v3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
    v31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>

vLLM's non-streaming rule (`extract_complete`): with `<｜tool▁calls▁begin｜>` in the text, every
complete call envelope found by its regex is a call whose arguments are the raw text (no JSON
re-serialization), and content is the text before the block (v3 adds the text after the last
`<｜tool▁calls▁end｜>`); the marker alone means tools were called (whitespace-only content is
dropped). Incomplete envelopes are not calls; a v3 envelope of another type than `function` makes
the whole output content. One difference: vLLM's regex searches the whole text, ours from the
marker on (an envelope before it went out as content in the stream: README, "vLLM 0.33 bugs we do
not follow").

Streaming: a small phase machine over the markers. The name goes out when the header is
complete (a header must sit on one line), then the raw arguments stream as generated, holding
back only a possible start of the closing marker. The block's text is kept until a call goes
out: a complete envelope of another type before that makes it all content, as vLLM; one that never
ends is no call, and (v3) the text after the last `<｜tool▁calls▁end｜>` is content. An envelope
cut off by the end of output, or another type after a call went out, cannot be taken back (vLLM's
stream sends it too); the non-streaming answer drops it (README).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
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
    # phases (serialized as these letters)
    CONTENT = "T"  # before the block
    BLOCK = "B"  # inside the block, between calls
    HEADER = "N"  # a call's header
    ARGS = "A"  # a call's arguments, streamed raw
    OTHER = "O"  # a complete header whose type is not "function": its envelope is waited for
    AFTER = "E"  # after the block
    PLAIN = "X"  # a call of another type came before any call: vLLM's answer is all content

    def start(self) -> State:
        # h: held partial marker; n: calls sent; hd: header text; raw: the block's text, kept
        # until a call goes out (a later call of another type makes it all content)
        # tl: in OTHER, the text after the last `<｜tool▁calls▁end｜>` (None: none seen)
        return {"ph": self.CONTENT, "h": "", "n": 0, "hd": "", "raw": None, "tl": None}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        if state["ph"] == self.PLAIN:
            return text, []
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        if state["raw"] is not None:
            state["raw"] += buf  # (what is held back at the end is taken out again below)
        content: list[str] = []
        out: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            if ph in (self.CONTENT, self.AFTER):
                at = buf.find(CALLS_BEGIN, pos)
                end = at if at != -1 else len(buf) - partial_suffix(buf[pos:], (CALLS_BEGIN,))
                if ph == self.CONTENT or self.CONTENT_AFTER_BLOCK:
                    content.append(buf[pos:end])
                if at == -1:
                    state["h"] = buf[end:]
                    break
                state["ph"] = self.BLOCK
                if state["n"] == 0 and ph == self.CONTENT:
                    state["raw"] = buf[at:]
                pos = at + len(CALLS_BEGIN)
                continue
            if ph == self.BLOCK:
                at, tag = find_first(buf, (CALL_BEGIN, CALLS_END), pos)
                if tag is None:
                    keep = partial_suffix(buf[pos:], (CALL_BEGIN, CALLS_END))
                    state["h"] = buf[len(buf) - keep:]
                    break
                pos = at + len(tag)
                if tag == CALL_BEGIN:
                    state["ph"] = self.HEADER
                    state["hd"] = ""
                else:
                    state["ph"] = self.AFTER
                    state["raw"] = None
            elif ph == self.HEADER:
                # vLLM's regex wants the header on one line: a newline before HEADER_END means no
                # call here, and the search for the next call goes on from that newline
                at, tag = find_first(buf, (self.HEADER_END, "\n"), pos)
                if tag is None:
                    keep = partial_suffix(buf[pos:], (self.HEADER_END,))
                    state["hd"] += buf[pos:len(buf) - keep]
                    state["h"] = buf[len(buf) - keep:]
                    if len(state["hd"]) > 4096:  # (bounded state: no name is that long)
                        state.update(ph=self.BLOCK, hd="")
                    break
                if tag == "\n" and self.HEADER_END.startswith("\n") and self.HEADER_END.startswith(buf[at:]):
                    state["hd"] += buf[pos:at]  # (the newline may start HEADER_END)
                    state["h"] = buf[at:]
                    break
                if tag == "\n":
                    state["hd"] = ""
                    state["ph"] = self.BLOCK
                    pos = at
                    continue
                header = state["hd"] + buf[pos:at]
                pos = at + len(self.HEADER_END)
                state["hd"] = ""
                name = self.parse_header(header)
                if name is None:
                    state["ph"] = self.OTHER if self.other_type(header) else self.BLOCK
                    continue
                out.append({"index": state["n"], "id": None, "type": "function",
                            "function": {"name": name, "arguments": ""}})
                state["raw"] = None  # a call went out: the fallback is gone
                state["ph"] = self.ARGS
            elif ph == self.OTHER:
                at = buf.find(self.ARGS_END, pos)
                if at == -1:
                    keep = partial_suffix(buf[pos:], (self.ARGS_END, CALLS_END))
                    self._track_after_block(state, buf[pos:len(buf) - keep])
                    state["h"] = buf[len(buf) - keep:]
                    break
                pos = at + len(self.ARGS_END)
                state["tl"] = None
                if state["raw"] is not None and state["n"] == 0:
                    # vLLM's answer is then the whole text: the block held so far goes out as content
                    content.append(state["raw"])
                    state.update(ph=self.PLAIN, raw=None)
                    return "".join(content), merge_tool_deltas(out)
                state["ph"] = self.BLOCK  # after a call went out it cannot be taken back
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
                state["ph"] = self.BLOCK
        if state["h"] and state["raw"] is not None:
            state["raw"] = state["raw"][:len(state["raw"]) - len(state["h"])]
        return "".join(content), merge_tool_deltas(out)

    def _track_after_block(self, state: State, text: str) -> None:
        """While another type's envelope waits for its end, keep the text after the last
        `<｜tool▁calls▁end｜>`: if the envelope never ends, vLLM's regex finds no call there and
        its answer (v3) has that text as content after the block."""
        if not self.CONTENT_AFTER_BLOCK:
            return
        at = text.rfind(CALLS_END)
        if at != -1:
            state["tl"] = text[at + len(CALLS_END):]
        elif state.get("tl") is not None:
            state["tl"] += text

    def tools_called(self, state: State) -> bool:
        return state["ph"] != self.CONTENT  # vLLM: the block marker alone means tools were called

    def other_type(self, header: str) -> bool:
        """A complete call header whose type is not "function" (vLLM then returns no calls)."""
        return False

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        out: list[ToolCallDelta] = []
        content = ""
        ph = state["ph"]
        if ph == self.CONTENT or (ph == self.AFTER and self.CONTENT_AFTER_BLOCK):
            content = held
        elif ph == self.ARGS and held:
            out.append({"index": state["n"], "function": {"arguments": held}})
        elif ph == self.OTHER and state.get("tl") is not None:
            content = state["tl"] + held  # (held: a proper prefix of a marker, so text)
        return content, out


V3_CALL = re.compile(re.escape(CALL_BEGIN) + r"(?P<type>.*)" + re.escape(SEP)
                     + r"(?P<name>.*)\n```json\n(?P<args>[\s\S]*?)\n```" + re.escape(CALL_END))
V31_CALL = re.compile(re.escape(CALL_BEGIN) + r"(?P<name>.*?)" + re.escape(SEP) + r"(?P<args>[\s\S]*?)"
                      + re.escape(CALL_END))


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

    def other_type(self, header: str) -> bool:
        return SEP in header and "\n" not in header and header.rpartition(SEP)[0] != "function"

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if CALLS_BEGIN not in text:
            return None, text
        calls = []
        # (from the block marker on: an envelope before it went out as content in the stream; vLLM's
        # answer, searching the whole text, takes it back: README, "vLLM 0.33 bugs we do not follow")
        for m in V3_CALL.finditer(text, text.find(CALLS_BEGIN)):
            if m.group("type") != "function":
                return None, text  # vLLM: a ToolCall of another type fails validation
            calls.append({"id": None, "name": m.group("name"), "arguments": m.group("args")})
        content = text[:text.find(CALLS_BEGIN)]
        end = text.rfind(CALLS_END)
        if end != -1:
            content += text[end + len(CALLS_END):]
        return calls, content or None


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
        calls = [{"id": None, "name": m.group("name"), "arguments": m.group("args")}
                 for m in V31_CALL.finditer(text, text.find(CALLS_BEGIN))]  # (from the marker on, as v3)
        content = text[:text.find(CALLS_BEGIN)]
        return calls, content or None
