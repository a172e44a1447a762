"""llama3_json / llama4_json: `[<|python_tag|>]{"name": .., "parameters"|"arguments": {..}}[; {...}]` (spec 6.3).

vLLM's non-streaming rule (`extract_complete`, exact): every `{` that is not inside an object
already read starts a JSON object (`raw_decode`); each needs "name" and "arguments" (else
"parameters"); any failure means no calls and the whole text as content; with calls, content
is null and text between objects is ignored.

Streaming: that rule cannot be decided early for text that begins as prose (a `{` may come
much later), so, like vLLM's own stream, tool parsing is active only when the output starts
(after whitespace, which is held back) with `<|python_tag|>`, `{` or `[`; otherwise everything
streams as content. In tool mode each object is read by the incremental JSON scanner and its
arguments stream re-serialized; if the first object breaks before its name was sent, the
output falls back to plain content (as vLLM does); a later break stops the tool stream.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.families.hermes import JsonCallReader
from core.parsers.registry import register_tool
from core.parsers.structural_tag import THINK_EXCLUDES, TagModel, apply_structural_tag

BOT = "<|python_tag|>"
_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


@register_tool("llama3_json", "llama4_json")
class Llama3JsonToolParser(ToolParser):
    name = "llama3_json"
    supports_required_and_named = False
    TAG_MODEL = TagModel([('{"name": "{name}", "parameters": ', "}")], ['{"name": '], excludes=THINK_EXCLUDES,
                         required_triggered=True)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        if ctx.tokenizer.token_to_id(BOT) is None:
            raise ValueError(f"Llama3JsonToolParser could not locate the bot token '{BOT}' in the tokenizer.")
        self.reader = JsonCallReader(("arguments", "parameters"))

    def adjust_request(self, request: Any) -> Any:
        return apply_structural_tag(request, self.TAG_MODEL)

    # -- non-streaming: vLLM's rule, exactly ---------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if BOT not in text and "{" not in text:
            return None, text
        end = -1
        calls = []
        start = text.find("{")
        while start != -1:
            if start > end:
                try:
                    obj, used = _DECODER.raw_decode(text[start:])
                    end = start + used
                    name = obj["name"]
                    args = obj["arguments"] if "arguments" in obj else obj["parameters"]
                    if not isinstance(name, str):
                        raise TypeError("name")
                    calls.append({"id": None, "name": name, "arguments": json.dumps(args, ensure_ascii=False)})
                except Exception:  # noqa: BLE001 - vLLM returns the text as content on any failure
                    return None, text
            start = text.find("{", start + 1)
        if calls:
            return calls, None
        return None, text

    # -- streaming --------------------------------------------------------------------------

    def start(self) -> State:
        # ph: U undecided, C content, S between objects, O inside an object, X fell back, D dead
        return {"ph": "U", "h": "", "n": 0, "c": None, "raw": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        self._consume(state, text, content, out)
        return "".join(content), out

    def _consume(self, state: State, text: str, content: list[str], out: list[ToolCallDelta]) -> None:
        ph = state["ph"]
        if ph in ("C", "X"):
            content.append(text)
            return
        if ph == "D":
            return
        if state["raw"] is not None:
            state["raw"] += text
        if ph == "U":
            held = state["h"] + text
            rest = held.lstrip(_WS)
            if not rest or (BOT.startswith(rest) and rest != BOT):
                state["h"] = held
                return
            state["h"] = ""
            if rest.startswith(BOT):
                state["ph"] = "S"
                text = rest[len(BOT):]
            elif rest.startswith("{") or rest.startswith("["):
                state["ph"] = "S"  # "[" too: a forced list of calls is still objects to find
                text = rest
            else:
                state["ph"] = "C"
                state["raw"] = None
                content.append(held)
                return
        pos = 0
        while pos < len(text):
            ph = state["ph"]
            if ph == "S":
                at = text.find("{", pos)
                if at == -1:
                    return
                state["c"] = self.reader.new_call(state["n"])
                state["ph"] = "O"
                pos = at
            elif ph == "O":
                call = state["c"]
                used = self.reader.feed(call, text[pos:], out)
                pos += used
                if call["hdr"]:
                    state["raw"] = None
                if call["bad"] or call["js"]["err"]:
                    self._broken(state, content)
                    return
                if call["js"]["done"]:
                    if not self.reader.complete(call):
                        self._broken(state, content)
                        return
                    state["n"] += 1
                    state["c"] = None
                    state["ph"] = "S"
            else:  # fell back or dead in the middle of this text
                if ph == "X":
                    return  # raw already holds (and emitted) the whole text
                return

    def _broken(self, state: State, content: list[str]) -> None:
        if state["raw"] is not None:
            content.append(state["raw"])  # nothing of any call was sent: it is all content
            state["raw"] = None
            state["ph"] = "X"
        else:
            state["ph"] = "D"
        state["c"] = None

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        ph = state["ph"]
        if ph == "U":
            content.append(state["h"])
            state["h"] = ""
        elif ph == "S" and state["n"] == 0 and state["raw"] is not None:
            self._broken(state, content)  # tool mode but no object at all: plain content
        elif ph == "O":
            call = state["c"]
            self.reader.finish_scalar(call, out)
            if not self.reader.complete(call) and state["raw"] is not None:
                self._broken(state, content)
        return "".join(content), out
