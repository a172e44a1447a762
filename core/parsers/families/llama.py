"""llama3_json / llama4_json: `[<|python_tag|>]{"name": .., "parameters"|"arguments": {..}}[; {...}]`.

vLLM's non-streaming rule (`extract_complete`): every `{` that is not inside an object
already read starts a JSON object (`raw_decode`); each needs "name" and "arguments" (else
"parameters"); any failure means no calls and the whole text as content; with calls, content
is null and text between objects is ignored. One deliberate difference: an output that starts
as prose (not `<|python_tag|>`, `{` or `[` after whitespace) keeps that prose, the text before
its first `{`, as the content beside the calls (vLLM drops it, though both its stream and ours
send it: README, "vLLM 0.33 bugs we do not follow").

Streaming: an output that starts (after whitespace, held back) with `<|python_tag|>`, `{` or
`[` is in calls mode: each object is read by the incremental JSON scanner and its arguments
stream re-serialized; if the first object breaks before its name was sent, the output falls
back to plain content (as vLLM does); a later break stops the tool stream. An output that
starts as prose streams as content, but each `{` in it is held with what follows until the
object is complete: a call is then sent whole (and calls mode begins), anything else (not
JSON, not a call) makes the rest plain content, as in the non-streaming answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.families.hermes import JsonCallReader
from core.parsers.jsonstream import JsonScanner, dumps, escape_lone_surrogates, new_state
from core.parsers.structural_tag import THINK_EXCLUDES, TagModel, apply_structural_tag

BOT = "<|python_tag|>"
_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


def _starts_calls(rest: str) -> bool:
    """An output that starts (after whitespace) this way is read as calls from its start."""
    return rest.startswith(BOT) or rest.startswith("{") or rest.startswith("[")


def prose_before_calls(text: str) -> str | None:
    """The content beside calls: the prose an output starts with, up to its first `{` (what the
    stream sent before the first call appeared), or None for an output that starts as calls."""
    if _starts_calls(text.lstrip(_WS)):
        return None
    return text[:text.find("{")] or None


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
                    calls.append({"id": None, "name": escape_lone_surrogates(name), "arguments": dumps(args)})
                except Exception:  # noqa: BLE001 - vLLM returns the text as content on any failure
                    return None, text
            start = text.find("{", start + 1)
        if calls:
            return calls, prose_before_calls(text)
        return None, text

    # -- streaming --------------------------------------------------------------------------
    # phases (serialized as these letters)
    UNDECIDED = "U"  # leading whitespace or a partial <|python_tag|>
    PROSE = "C"  # content; a `{` may still open a call
    CANDIDATE = "H"  # a `{` after prose: the object is held until it is known to be a call
    BETWEEN = "S"  # calls mode: text outside objects is dropped
    OBJECT = "O"  # calls mode: a call object streams
    PLAIN = "X"  # an object failed before any call went out: everything is content
    DEAD = "D"  # an object failed after calls went out (they cannot be taken back)

    def start(self) -> State:
        # h: held leading text; n: calls sent; c: the call being read; raw: text kept for the
        # plain-content fallback (until a call goes out); js: the candidate object's scanner
        return {"ph": self.UNDECIDED, "h": "", "n": 0, "c": None, "raw": "", "js": None}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        self._consume(state, text, content, out)
        return "".join(content), out

    def _consume(self, state: State, text: str, content: list[str], out: list[ToolCallDelta]) -> None:
        ph = state["ph"]
        if ph == self.PLAIN:
            content.append(text)
            return
        if ph == self.DEAD:
            return
        if ph == self.UNDECIDED:
            held = state["h"] + text
            rest = held.lstrip(_WS)
            if not rest or (BOT.startswith(rest) and rest != BOT):
                state["h"] = held
                return
            state["h"] = ""
            if _starts_calls(rest):
                state["ph"] = self.BETWEEN  # "[" too: a forced list of calls is still objects to find
                state["raw"] = held
                text = rest[len(BOT):] if rest.startswith(BOT) else rest
            else:
                state["ph"] = self.PROSE
                state["raw"] = None
                text = held
        elif state["raw"] is not None and ph != self.CANDIDATE:
            state["raw"] += text
        pos = 0
        while pos < len(text):
            ph = state["ph"]
            if ph == self.PROSE:
                at = text.find("{", pos)
                if at == -1:
                    content.append(text[pos:])
                    return
                content.append(text[pos:at])
                state.update(ph=self.CANDIDATE, raw="", js=new_state(0))
                pos = at
            elif ph == self.CANDIDATE:
                used = JsonScanner(state["js"]).feed(text[pos:])
                state["raw"] += text[pos:pos + used]
                pos += used
                if state["js"]["err"]:
                    self._plain(state, content, text[pos:])
                    return
                if state["js"]["done"]:
                    if not self._candidate_call(state, out):
                        self._plain(state, content, text[pos:])
                        return
            elif ph == self.BETWEEN:
                at = text.find("{", pos)
                if at == -1:
                    return
                state["c"] = self.reader.new_call(state["n"])
                state["ph"] = self.OBJECT
                pos = at
            elif ph == self.OBJECT:
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
                    state["ph"] = self.BETWEEN
            else:  # fell back (the rest is in raw, already sent) or dead
                return

    def _candidate_call(self, state: State, out: list[ToolCallDelta]) -> bool:
        """A complete object after prose: send it whole if it is a call (vLLM's rule)."""
        try:
            obj = json.loads(state["raw"])
            name = obj["name"]
            args = obj["arguments"] if "arguments" in obj else obj["parameters"]
        except (ValueError, KeyError, TypeError):
            return False
        if not isinstance(name, str):
            return False
        out.append({"index": state["n"], "id": None, "type": "function",
                    "function": {"name": escape_lone_surrogates(name), "arguments": dumps(args)}})
        state.update(n=state["n"] + 1, ph=self.BETWEEN, raw=None, js=None)
        return True

    def _plain(self, state: State, content: list[str], rest: str) -> None:
        """The first object is no call: vLLM's answer is all the text, as content."""
        content.append(state["raw"] + rest)
        state.update(ph=self.PLAIN, raw=None, js=None)

    def _broken(self, state: State, content: list[str]) -> None:
        if state["raw"] is not None:
            content.append(state["raw"])  # nothing of any call was sent: it is all content
            state["raw"] = None
            state["ph"] = self.PLAIN
        else:
            state["ph"] = self.DEAD
        state["c"] = None

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        ph = state["ph"]
        if ph == self.UNDECIDED:
            content.append(state["h"])
            state["h"] = ""
        elif ph == self.CANDIDATE:
            js = state["js"]
            JsonScanner(js).finish()
            if not (js["done"] and not js["err"] and self._candidate_call(state, out)):
                self._plain(state, content, "")
        elif ph == self.BETWEEN and state["n"] == 0 and state["raw"] is not None:
            self._broken(state, content)  # tool mode but no object at all: plain content
        elif ph == self.OBJECT:
            call = state["c"]
            self.reader.finish_scalar(call, out)
            if not self.reader.complete(call) and state["raw"] is not None:
                self._broken(state, content)
        return "".join(content), out
