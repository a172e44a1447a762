"""Hunyuan A13B (tencent/Hunyuan-A13B-Instruct): `--reasoning-parser hunyuan_a13b` and
`--tool-call-parser hunyuan_a13b`, vLLM 0.33's legacy parsers.

    <think>\\nREASONING\\n</think>\\n<answer>\\nANSWER\\n</answer>
    ... <tool_calls>[{"name": "f", "arguments": {...}}]</tool_calls>

The markers are text (Hunyuan's vocabulary spells `<think>` in several tokens), so vLLM's
non-streaming rules read strings.

hunyuan_a13b (reasoning), vLLM's non-streaming rule (RS is `\\n</think>\\n<answer>\\n`, END
`\\n</answer>`): with END in the output, an output that starts with `<think>\\n` and has an RS
with an END after it is reasoning up to the first RS and content from there to the next END;
otherwise the content is the text before the first END, no reasoning. Without END: a `<think>\\n`
anywhere and an RS after it split the output there (the text before `<think>\\n` dropped), else
it is all content. Empty parts are None. `is_reasoning_end` is false for a fresh parser (vLLM's is
its stream's state).

Ours, streaming and not (vLLM's rule except where it takes back what its own stream sent:
core/parsers/README.md, "vLLM 0.33 bugs we do not follow"): an output starting with `<think>\\n` is
reasoning until RS (all of it without one), then content until END (or the end); any other output
is content until END. Text after END is dropped.

hunyuan_a13b (tools), vLLM's non-streaming rule: the first `<tool_calls>...</tool_calls>`
block (vLLM: not strictly inside a `<think>...</think>` of the text; ours reads those too, as the
stream can only) whose stripped body is JSON is the one read; none, and there are no calls. It must be a list of objects with "name" (a string) and
"arguments" (an object, re-serialized with `json.dumps(..., ensure_ascii=False)`, or a string
taken as written; anything else fails) — items without both keys skipped; no item left or a
failure, and there are no calls. With calls the content is the text before the block (None when
only whitespace); the text after it is dropped.

Tool streaming: leading whitespace is held (blank content before calls is None), other text streams;
a block is held until `</tool_calls>`: a body that is not JSON goes out as content, one that is
JSON decides (its calls out and the rest dropped, or no calls and the rest all content).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ReasoningParser, State, ToolCallDelta, ToolParser
from core.parsers.jsonstream import dumps, escape_lone_surrogates
from core.parsers.text import partial_suffix

THINK = "<think>\n"
RS = "\n</think>\n<answer>\n"
END = "\n</answer>"
CALLS_START, CALLS_END = "<tool_calls>", "</tool_calls>"


class HunyuanA13BReasoningParser(ReasoningParser):
    name = "hunyuan_a13b"

    # phases (serialized as these letters)
    START = "S"  # the first characters: `<think>\n` or not
    REASONING = "R"
    CONTENT = "C"
    DONE = "D"  # after END: dropped

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return False

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        # (what the stream sends, README "vLLM 0.33 bugs we do not follow": vLLM's rule makes an
        # output cut off in its reasoning, or with END only in it, content, and splits text at a
        # later THINK)
        if text.startswith(THINK):
            body = text[len(THINK):]
            rs = body.find(RS)
            if rs == -1:
                return body or None, None
            content = body[rs + len(RS):]
            stop = content.find(END)
            return body[:rs] or None, (content[:stop] if stop != -1 else content) or None
        end = text.find(END)
        return (None, text[:end] or None) if end != -1 else (None, text)

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": self.START, "h": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        buf = state["h"] + text
        state["h"] = ""
        if state["p"] == self.START:
            if len(buf) < len(THINK) and THINK.startswith(buf):
                state["h"] = buf
                return "", ""
            if buf.startswith(THINK):
                state["p"], buf = self.REASONING, buf[len(THINK):]
            else:
                state["p"] = self.CONTENT
        reasoning = ""
        if state["p"] == self.REASONING:
            at = buf.find(RS)
            if at == -1:
                keep = partial_suffix(buf, (RS,))
                state["h"] = buf[len(buf) - keep:]
                return buf[:len(buf) - keep], ""
            reasoning, buf = buf[:at], buf[at + len(RS):]
            state["p"] = self.CONTENT
        if state["p"] == self.CONTENT:
            at = buf.find(END)
            if at == -1:
                keep = partial_suffix(buf, (END,))
                state["h"] = buf[len(buf) - keep:]
                return reasoning, buf[:len(buf) - keep]
            state["p"] = self.DONE
            return reasoning, buf[:at]
        return reasoning, ""

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        if state["p"] == self.REASONING:
            return held, ""
        return ("", held) if state["p"] != self.DONE else ("", "")


def _calls(body: Any) -> list[dict[str, Any]] | None:
    """A JSON block's calls as vLLM builds them; None where it has none (or raises)."""
    if not isinstance(body, list):
        return None
    calls = []
    for item in body:
        if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
            continue
        name, args = item["name"], item["arguments"]
        if not isinstance(name, str) or not isinstance(args, (dict, str)):
            return None  # (FunctionCall wants str name and arguments: vLLM raises, no calls)
        arguments = dumps(args) if isinstance(args, dict) else escape_lone_surrogates(args)
        # (vLLM's ids for this parser are its own: call_ and 16 hex digits)
        calls.append({"id": f"call_{secrets.token_hex(8)}", "name": escape_lone_surrogates(name),
                      "arguments": arguments})
    return calls or None


def _loads(body: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(body.strip())
    except ValueError:
        return False, None


class HunyuanA13BToolParser(ToolParser):
    name = "hunyuan_a13b"

    # phases (serialized as these letters)
    TEXT = "T"
    BLOCK = "B"  # inside <tool_calls>, held in "blk"
    PLAIN = "X"  # a JSON block without calls: everything is content
    DONE = "D"  # calls sent: the rest is dropped

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        # (a block inside a `<think>...</think>` of this text is read like any other: README,
        # "vLLM 0.33 bugs we do not follow")
        pos = 0
        while (start := text.find(CALLS_START, pos)) != -1:
            close = text.find(CALLS_END, start + len(CALLS_START))
            if close == -1:
                break
            pos = close + len(CALLS_END)
            ok, body = _loads(text[start + len(CALLS_START):close])
            if not ok:
                continue
            calls = _calls(body)
            if calls is None:
                return None, text
            prefix = text[:start]
            return calls, prefix if prefix.strip() else None
        return None, text

    def start(self) -> State:
        # h: a partial <tool_calls> held; w: leading whitespace held; nw: other text went out;
        # blk: the open block's text; n: calls sent
        return {"ph": self.TEXT, "h": "", "w": "", "nw": False, "blk": "", "n": 0}

    def _text(self, state: State, text: str) -> str:
        if state["nw"]:
            return text
        if not text.strip():
            state["w"] += text
            return ""
        out, state["w"], state["nw"] = state["w"] + text, "", True
        return out

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        ph = state["ph"]
        if ph == self.PLAIN:
            return text, []
        if ph == self.DONE:
            return "", []
        buf = state["h"] + text
        state["h"] = ""
        out: list[str] = []
        calls: list[ToolCallDelta] = []
        while buf:
            if state["ph"] == self.PLAIN:
                out.append(buf)
                break
            if state["ph"] == self.DONE:
                break
            if state["ph"] == self.TEXT:
                at = buf.find(CALLS_START)
                if at == -1:
                    keep = partial_suffix(buf, (CALLS_START,))
                    out.append(self._text(state, buf[:len(buf) - keep]))
                    state["h"] = buf[len(buf) - keep:]
                    break
                out.append(self._text(state, buf[:at]))
                state.update(ph=self.BLOCK, blk=CALLS_START)
                buf = buf[at + len(CALLS_START):]
                continue
            blk = state["blk"] + buf
            close = blk.find(CALLS_END, len(CALLS_START))
            if close == -1:
                state["blk"] = blk
                break
            end = close + len(CALLS_END)
            block, buf = blk[:end], blk[end:]
            state["blk"] = ""
            ok, body = _loads(block[len(CALLS_START):close])
            if not ok:  # not the block vLLM reads: its text is content
                state["ph"] = self.TEXT
                out.append(self._text(state, block))
                continue
            found = _calls(body)
            if found is None:  # vLLM reads this block and finds no call: all content
                out.append(state["w"] + block)
                state.update(ph=self.PLAIN, w="")
                continue
            for call in found:
                calls.append({"index": state["n"], "id": call["id"], "type": "function",
                              "function": {"name": call["name"], "arguments": call["arguments"]}})
                state["n"] += 1
            state.update(ph=self.DONE, w="")
        return "".join(out), calls

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        content = ""
        if state["ph"] in (self.TEXT, self.BLOCK):
            content = state["w"] + state["blk"] + held
        state.update(w="", blk="")
        return content, []

    def tools_called(self, state: State) -> bool:
        return state["n"] > 0
