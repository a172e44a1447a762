"""Incremental JSON scanner that re-serializes as it reads, in `json.dumps(..., ensure_ascii=False)` form.

Why: vLLM's non-streaming tool parsers return arguments as `json.dumps(json.loads(raw))`, while
the model writes them with its own spacing and escapes. To stream arguments *as they are
generated* and still have the concatenated fragments equal the non-streaming string, we
canonicalize on the fly: strings are emitted character by character (escapes once complete),
numbers once terminated, structure immediately. Work is O(new characters); the state is a small
dict (container stack, the partial token) so it can live in the client-carried `stream_state`.

The scanner reads one top-level value and reports:
* `("frag", key, text)`: canonical text of the value of a *captured* key (a key of an object at
  `capture_depth`, e.g. 1 for `{"name":..,"arguments":..}`, 2 for `[{..},{..}]`);
* `("start", key)` / `("end", key)`: that value began / completed;
* `("obj", depth)`: an object at `capture_depth` closed (one call of a list is complete);
* `("done",)`: the top-level value is complete (`feed` stops there and says how much it used);
* `("error",)`: the text is not JSON (the scanner stops for good).

Duplicate keys are not folded (json.loads keeps the last value); callers compare the streamed
text with the exact `json.dumps` at the end of a call and send the difference when it is a
suffix.

Surrogates: a `\\uD83D\\uDDFC` pair becomes its character (as json.loads reads it), whatever the
chunk boundaries; the state keeps a pending high surrogate as its code point, never as a
character, so it always serializes (orjson refuses lone surrogates). A surrogate that stays
alone is written back as its escape (`dumps`, `escape_lone_surrogates`): UTF-8, and so every
response body, cannot carry it (vLLM's json.dumps(ensure_ascii=False) keeps it raw and its
response then fails to encode).
"""

from __future__ import annotations

import json
import re
from typing import Any

_WS = " \t\n\r"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_PLAIN_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_LITERALS = {"true": "true", "false": "false", "null": "null", "NaN": "NaN",
             "Infinity": "Infinity", "-Infinity": "-Infinity"}
_LITERAL_PREFIXES = frozenset(p[:i] for p in _LITERALS for i in range(1, len(p) + 1))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_lone_surrogates(text: str) -> str:
    """`text` with every lone surrogate written as its JSON escape (valid pairs are characters)."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(value: Any) -> str:
    """json.dumps(value, ensure_ascii=False), lone surrogates kept as escapes (see above)."""
    return escape_lone_surrogates(json.dumps(value, ensure_ascii=False))


def dumps_str_body(text: str) -> str:
    """The inside of json.dumps(text, ensure_ascii=False), without the quotes."""
    out = []
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch < " ":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(ch, f"\\u{ord(ch):04x}"))
        elif "\ud800" <= ch <= "\udfff":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _number_text(raw: str) -> str | None:
    """json.dumps(json.loads(raw)) for a complete number token, or None when invalid."""
    if raw == "-Infinity":
        return raw
    if not _NUMBER.fullmatch(raw):
        return None
    if "." in raw or "e" in raw or "E" in raw:
        value = float(raw)
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    return str(int(raw))


def new_state(capture_depth: int = 1) -> dict[str, Any]:
    # stk: open containers ("o"/"a"); ex: what comes next; tk/tb: partial token and its raw chars;
    # key: last key read at capture depth; cap/cl: captured key and the stack depth its value is at
    return {"stk": "", "ex": "V", "tk": None, "tb": "", "hs": 0, "cd": capture_depth,
            "key": None, "kb": None, "cap": None, "cl": 0, "err": False, "done": False}


class JsonScanner:
    """Operates on a state dict from `new_state`; `feed` mutates it."""

    __slots__ = ("s", "events")

    def __init__(self, state: dict[str, Any]) -> None:
        self.s = state
        self.events: list[tuple] = []

    # -- emission -------------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        cap = self.s["cap"]
        if cap is not None and text:
            ev = self.events
            if ev and ev[-1][0] == "frag" and ev[-1][1] == cap:
                ev[-1] = ("frag", cap, ev[-1][2] + text)
            else:
                ev.append(("frag", cap, text))

    def _value_started(self) -> None:
        """A value begins at the current stack depth: start capturing if it belongs to a captured key."""
        s = self.s
        if s["cap"] is None and s["key"] is not None and len(s["stk"]) == s["cd"] and s["stk"][-1:] == "o":
            s["cap"] = s["key"]
            s["cl"] = len(s["stk"])
            self.events.append(("start", s["key"]))

    def _value_ended(self) -> None:
        """A value completed; the stack is back at the depth it started at."""
        s = self.s
        if s["cap"] is not None and len(s["stk"]) == s["cl"]:
            self.events.append(("end", s["cap"]))
            s["cap"] = None
            s["key"] = None
        if not s["stk"]:
            s["done"] = True
            s["ex"] = "D"
        else:
            s["ex"] = ","

    # -- the scanner ----------------------------------------------------------------------

    def feed(self, text: str) -> int:
        """Consume `text`; return how many characters were used (less than len only when done/error)."""
        s = self.s
        i, n = 0, len(text)
        while i < n:
            if s["done"] or s["err"]:
                return i
            tk = s["tk"]
            if tk == "s" or tk == "y":
                i = self._string(text, i)
                continue
            ch = text[i]
            if tk == "n" or tk == "l":
                if (tk == "n" and ch in _NUMBER_CHARS) or (tk == "l" and (s["tb"] + ch) in _LITERAL_PREFIXES) \
                        or (tk == "n" and s["tb"] == "-" and ch == "I"):
                    s["tb"] += ch
                    if tk == "n" and s["tb"] == "-I":
                        s["tk"] = "l"
                    i += 1
                    continue
                if not self._end_scalar():
                    return i
                continue
            ex = s["ex"]
            if ch in _WS:
                i += 1
                continue
            if ex == "V":
                if ch == "{":
                    self._value_started()
                    self._emit("{")
                    s["stk"] += "o"
                    s["ex"] = "K"
                elif ch == "[":
                    self._value_started()
                    self._emit("[")
                    s["stk"] += "a"
                    s["ex"] = "A"
                elif ch == '"':
                    self._value_started()
                    self._emit('"')
                    s["tk"] = "s"
                elif ch in "-0123456789":
                    self._value_started()
                    s["tk"] = "n"
                    s["tb"] = ch
                elif ch in "tfnNI":
                    self._value_started()
                    s["tk"] = "l"
                    s["tb"] = ch
                else:
                    return self._error(i)
            elif ex == "A":  # first element or ]
                if ch == "]":
                    self._close("a", "]")
                else:
                    s["ex"] = "V"
                    continue
            elif ex == "K" or ex == "k":  # key (or } right after {)
                if ch == '"':
                    s["tk"] = "y"
                    s["kb"] = "" if len(s["stk"]) == s["cd"] else None
                    s["tb"] = ""
                    self._emit('"')
                elif ch == "}" and ex == "K":
                    self._close("o", "}")
                else:
                    return self._error(i)
            elif ex == ":":
                if ch != ":":
                    return self._error(i)
                self._emit(": ")
                s["ex"] = "V"
            elif ex == ",":
                top = s["stk"][-1]
                if ch == ",":
                    self._emit(", ")
                    s["ex"] = "k" if top == "o" else "V"
                elif (ch == "}" and top == "o") or (ch == "]" and top == "a"):
                    self._close(top, ch)
                else:
                    return self._error(i)
            else:
                return self._error(i)
            i += 1
        return i

    def _close(self, kind: str, ch: str) -> None:
        s = self.s
        self._emit(ch)
        s["stk"] = s["stk"][:-1]
        if kind == "o" and len(s["stk"]) + 1 == s["cd"]:
            self.events.append(("obj", s["cd"]))
        self._value_ended()

    def _error(self, i: int) -> int:
        self.s["err"] = True
        self.events.append(("error",))
        return i

    def _end_scalar(self) -> bool:
        s = self.s
        raw = s["tb"]
        if s["tk"] == "n":
            out = _number_text(raw)
        else:
            out = _LITERALS.get(raw)
        s["tk"] = None
        s["tb"] = ""
        if out is None:
            self._error(0)
            return False
        self._emit(out)
        self._value_ended()
        return True

    def finish(self) -> None:
        """End of input: a trailing number/literal at top level completes (json.loads accepts `12`)."""
        s = self.s
        if s["tk"] in ("n", "l") and not s["err"]:
            self._end_scalar()

    def _string(self, text: str, i: int) -> int:
        """Consume string characters from text[i:]; handles escapes split across feeds."""
        s = self.s
        is_key = s["tk"] == "y"
        n = len(text)
        while i < n:
            if s["tb"]:  # inside an escape sequence
                s["tb"] += text[i]
                i += 1
                esc = s["tb"]
                if esc[1] == "u":
                    if len(esc) < 6:
                        continue
                    try:
                        code = int(esc[2:], 16)
                    except ValueError:
                        self._error(i)
                        return n
                    if len(esc[2:]) != 4 or not all(c in "0123456789abcdefABCDEF" for c in esc[2:]):
                        self._error(i)
                        return n
                    s["tb"] = ""
                    self._string_char(chr(code), is_key, escaped=True)
                else:
                    ch = _ESCAPES.get(esc[1])
                    s["tb"] = ""
                    if ch is None:
                        self._error(i)
                        return n
                    self._string_char(ch, is_key, escaped=True)
                continue
            m = _PLAIN_RUN.match(text, i)
            if m:
                run = m.group()
                self._flush_surrogate(is_key)
                if is_key and s["kb"] is not None:
                    s["kb"] += run
                self._emit(run)
                i = m.end()
                continue
            ch = text[i]
            i += 1
            if ch == '"':
                self._flush_surrogate(is_key)
                s["tk"] = None
                if is_key:
                    if s["kb"] is not None:
                        s["key"] = s["kb"]
                        s["kb"] = None
                    s["ex"] = ":"
                    self._emit('"')
                    return i
                self._emit('"')
                self._value_ended()
                return i
            if ch == "\\":
                s["tb"] = "\\"
                continue
            # a raw control character inside a string: json.loads (strict) rejects it
            self._error(i)
            return n
        return i

    def _string_char(self, ch: str, is_key: bool, escaped: bool) -> None:
        s = self.s
        code = ord(ch)
        if 0xD800 <= code <= 0xDBFF:  # a high surrogate waits for its low half (kept as a number)
            self._flush_surrogate(is_key)
            s["hs"] = code
            return
        if 0xDC00 <= code <= 0xDFFF and s["hs"]:
            ch = chr(0x10000 + ((s["hs"] - 0xD800) << 10) + (code - 0xDC00))
            s["hs"] = 0
        else:
            self._flush_surrogate(is_key)
        text = dumps_str_body(ch)  # (a lone low surrogate comes out as its escape)
        if is_key and s["kb"] is not None:
            s["kb"] += text if "\ud800" <= ch <= "\udfff" else ch
        self._emit(text)

    def _flush_surrogate(self, is_key: bool) -> None:
        """A high surrogate not followed by its low half: written back as its escape."""
        s = self.s
        if s["hs"]:
            text, s["hs"] = f"\\u{s['hs']:04x}", 0
            if is_key and s["kb"] is not None:
                s["kb"] += text
            self._emit(text)
