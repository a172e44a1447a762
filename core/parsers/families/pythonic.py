"""pythonic / llama4_pythonic: the whole output is a Python list of calls, `[f(a=1, b='x'), g()]`.

vLLM's non-streaming rule (`extract_complete`, exact): the output must match vLLM's loose
call-list pattern and parse (`ast`) as a list whose elements are all calls; each call's
keyword arguments become JSON (literals, lists/tuples/sets as lists, dicts with literal keys,
`null`/`true`/`false` names, signed numbers); anything else makes the whole output content.
llama4_pythonic first drops a leading `<|python_start|>` and every `<|python_end|>`.

Streaming, as vLLM's: tool mode only when the output starts with `[`, else content. Each call's
name goes out at its `(`; its arguments go out one keyword argument at a time, as each value
completes (a value is a Python literal: its JSON form is known only once it is complete, so
this family holds back at most one argument value, never the call). The state keeps the text
of the current call only.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.jsonstream import dumps
from core.parsers.text import partial_suffix

try:  # the `regex` module (a transformers dependency) has match timeouts, like vLLM's check
    import regex as _re

    _HAS_TIMEOUT = True
except ImportError:  # pragma: no cover
    import re as _re

    _HAS_TIMEOUT = False

_CALL_LIST = _re.compile(
    r"\[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*"
    r"([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]", _re.DOTALL)
_FIRST_NAME = _re.compile(r"[a-zA-Z]\w*")  # vLLM's pattern: `[` then this, then `(`
_NAME = _re.compile(r"[a-zA-Z]\w*(?:\.[^\W\d]\w*)*")  # a later call target, dotted or not
_JSON_NAMES = {"null": None, "true": True, "false": False}
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"


class _NotLiteral(ValueError):
    pass


def literal(node: ast.expr) -> Any:
    """The JSON value of an argument expression (vLLM's accepted literal forms)."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (str, int, float)):
            return node.value
        raise _NotLiteral("constant")
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) for k in node.keys):
            raise _NotLiteral("dict key")
        return {k.value: literal(v) for k, v in zip(node.keys, node.values)}  # type: ignore[union-attr]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(v) for v in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(p, ast.Constant) for p in node.values):
        return "".join(str(p.value) for p in node.values)  # type: ignore[union-attr]
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise _NotLiteral(type(node).__name__)


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise _NotLiteral("call target")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call) -> dict[str, Any]:
    if not isinstance(node.func, (ast.Name, ast.Attribute)):
        raise _NotLiteral("call target")
    args = {kw.arg: literal(kw.value) for kw in node.keywords}
    return {"id": None, "name": _dotted(node.func), "arguments": dumps(args)}


def _matches(text: str) -> bool:
    try:
        if _HAS_TIMEOUT:
            return _CALL_LIST.match(text, timeout=1.0) is not None
        return _CALL_LIST.match(text) is not None
    except TimeoutError:
        return False


def calls_of(text: str) -> list[dict[str, Any]] | None:
    """`text` parsed (`ast`) as a list whose elements are all calls, as {id, name, arguments};
    None when it is not one (any failure: vLLM treats it as plain text)."""
    try:
        module = ast.parse(text)
        parsed = getattr(module.body[0], "value", None)
        if not isinstance(parsed, ast.List) or not all(isinstance(e, ast.Call) for e in parsed.elts):
            return None
        return [_call(e) for e in parsed.elts]  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - vLLM treats any failure as plain text
        return None


def call_list(text: str) -> list[dict[str, Any]] | None:
    """vLLM's pythonic rule for a whole `[f(a=1), g()]` text: its loose call-list pattern, then `calls_of`."""
    return calls_of(text) if _matches(text) else None


class PythonicToolParser(ToolParser):
    name = "pythonic"
    STRIP_PYTHON_TAGS = False

    def _normalize(self, text: str) -> str:
        if self.STRIP_PYTHON_TAGS and text.startswith(PYTHON_START):
            return text[len(PYTHON_START):].replace(PYTHON_END, "")
        return text

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        calls = call_list(self._normalize(text))
        return (calls, None) if calls is not None else (None, text)

    # -- streaming --------------------------------------------------------------------------
    # phases (serialized as these letters)
    UNDECIDED = "U"  # nothing yet, or a partial <|python_start|>
    CONTENT = "C"  # not a call list: plain content
    LIST = "L"  # in the list, between calls
    CALL = "K"  # in a call (cb: its text so far)
    AFTER = "E"  # after the list
    BROKEN = "X"  # malformed: content if nothing was sent yet, else nothing more

    def start(self) -> State:
        # h: held start; n: calls sent; cb: current call text; ea: its arguments sent; hdr: its
        # name sent; pa: any argument sent; pe: a partial <|python_end|> held (llama4_pythonic)
        # ab: vLLM's call-list pattern can no longer fail (a call had a keyword argument, whose `.*`
        # takes anything after it); until then calls without arguments wait in pend (names)
        return {"ph": self.UNDECIDED, "h": "", "n": 0, "cb": "", "ea": 0, "hdr": False, "pa": False, "pe": "",
                "ab": False, "pend": []}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        out: list[ToolCallDelta] = []
        if state["ph"] == self.UNDECIDED:
            text = state["h"] + text
            state["h"] = ""
            if self.STRIP_PYTHON_TAGS:
                if PYTHON_START.startswith(text):
                    state["h"] = text
                    return "", []
                if text.startswith(PYTHON_START):
                    text = text[len(PYTHON_START):]
                    state["tags"] = True
            if not text:
                return "", []
            if text.startswith("["):
                state["ph"] = self.LIST
                state["raw"] = (PYTHON_START if state.get("tags") else "") + "["
                text = text[1:]
            else:
                state["ph"] = self.CONTENT
                if state.get("tags"):  # no call list: the output is content as written
                    text = PYTHON_START + text
        if state["ph"] == self.CONTENT:
            return text, []
        if state.get("raw") is not None:
            state["raw"] += text  # kept until the first name is sent: a list that is no call is content
        if state.get("tags"):  # every <|python_end|> is dropped, even split across chunks
            text = state["pe"] + text
            keep = partial_suffix(text, (PYTHON_END,))
            state["pe"] = text[len(text) - keep:]
            text = text[:len(text) - keep].replace(PYTHON_END, "")
        self._tool_text(state, text, out)
        if state["ab"]:
            state["raw"] = None
        elif state["ph"] == self.BROKEN and state.get("raw") is not None:
            return self._fall_back(state), out
        return "", out

    def _fall_back(self, state: State) -> str:
        raw, state["raw"] = state["raw"], None
        state["ph"] = self.CONTENT
        return raw

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        if state["ph"] == self.UNDECIDED:
            return held, []
        out: list[ToolCallDelta] = []
        if state["pe"] and state["ph"] in (self.LIST, self.CALL):
            pending, state["pe"] = state["pe"], ""
            self._tool_text(state, pending, out)
        if state["ph"] == self.CALL:
            self._scan_call(state, out, final=True)
        if not out and state["n"] == 0 and not state["ab"] and state.get("raw") is not None:
            return self._fall_back(state), out
        return "", out

    def _tool_text(self, state: State, text: str, out: list[ToolCallDelta]) -> None:
        pos = 0
        while pos < len(text):
            ph = state["ph"]
            if ph in (self.AFTER, self.BROKEN):
                return
            if ph == self.LIST:
                ch = text[pos]
                if not state["ab"] and not self._pattern_allows(state, ch):
                    state["ph"] = self.BROKEN
                    return
                if ch in " \t\r\n,":
                    pos += 1
                elif ch == "]":
                    state["ph"] = self.AFTER
                    self._release(state, out)
                    return
                else:
                    state.update(ph=self.CALL, cb="", ea=0, hdr=False, pa=False)
            else:  # in a call: append and rescan the current call only
                state["cb"] += text[pos:]
                pos = len(text)
                rest = self._scan_call(state, out, final=False)
                if rest is not None:
                    state["ph"] = self.LIST
                    self._tool_text(state, rest, out)
                return

    def _pattern_allows(self, state: State, ch: str) -> bool:
        """Between calls, before vLLM's pattern is sure to match: `[` or `,` then a name at once,
        `)` then `,` or `]` (after blanks)."""
        prev = state.get("lc", "[")
        state["lc"] = ch if not ch.isspace() else (prev if prev != ")" else " ")
        if prev in "[,":
            return "a" <= ch.lower() <= "z" or (prev == "," and ch.isspace())
        if prev == ")":
            return ch == "," or ch == "]" or ch.isspace()
        return ch == "]" or ch.isspace()  # blanks after a `)`: only the list's end may follow

    def _release(self, state: State, out: list[ToolCallDelta]) -> None:
        """The pattern matches: the calls without arguments that waited go out."""
        state["ab"] = True
        for name in state["pend"]:
            out.append({"index": state["n"], "id": None, "type": "function", "function": {"name": name, "arguments": "{}"}})
            state["n"] += 1
        state["pend"] = []

    def _head(self, state: State, cb: str, paren: int, out: list[ToolCallDelta]) -> bool | None:
        """A call's name and first argument against vLLM's pattern: True to go on, None to wait."""
        if state["ab"]:
            name = cb[:paren].strip()
            if not _NAME.fullmatch(name):
                state["ph"] = self.BROKEN
                return False
        else:
            name = cb[:paren]
            after = cb[paren + 1:]
            head = _FIRST_NAME.match(after)
            if not _FIRST_NAME.fullmatch(name) or not after or (head is None and after[0] != ")"):
                if _FIRST_NAME.fullmatch(name) and not after:
                    return None
                state["ph"] = self.BROKEN
                return False
            if head is not None:
                if head.end() == len(after):
                    return None
                if after[head.end()] != "=":
                    state["ph"] = self.BROKEN
                    return False
                self._release(state, out)
        state["hdr"] = True
        state["nm"] = name
        if state["ab"]:
            out.append({"index": state["n"], "id": None, "type": "function", "function": {"name": name, "arguments": ""}})
        return True

    def _scan_call(self, state: State, out: list[ToolCallDelta], final: bool) -> str | None:
        """Emit what the current call's text now completes; return the text after its `)` if closed."""
        cb = state["cb"]
        paren = cb.find("(")
        if paren == -1:
            return None
        if not state["hdr"] and not self._head(state, cb, paren, out):
            return None
        args, closed_at = _split_args(cb, paren + 1)
        complete = args if closed_at is not None else args[:-1]
        for segment in complete[state["ea"]:]:
            piece = self._arg_json(segment)
            if piece is None:
                state["ph"] = self.BROKEN
                return None
            if piece:
                out.append({"index": state["n"], "function": {"arguments": (", " if state["pa"] else "{") + piece}})
                state["pa"] = True
            state["ea"] += 1
        if closed_at is None:
            return None
        state["cb"] = ""
        state["lc"] = ")"
        if not state["ab"]:  # a call without arguments before the pattern is sure: it waits
            state["pend"].append(state.pop("nm"))
            return cb[closed_at + 1:]
        out.append({"index": state["n"], "function": {"arguments": "}" if state["pa"] else "{}"}})
        state["n"] += 1
        return cb[closed_at + 1:]

    @staticmethod
    def _arg_json(segment: str) -> str | None:
        """`"key": value` for a keyword argument, "" for a positional one (ignored), None if invalid."""
        segment = segment.strip()
        if not segment:
            return ""
        eq = _top_level_eq(segment)
        if eq == -1:
            return ""  # positional: vLLM keeps only keywords
        key = segment[:eq].strip()
        try:
            value = literal(ast.parse(segment[eq + 1:].strip(), mode="eval").body)
        except Exception:  # noqa: BLE001
            return None
        return dumps(key) + ": " + dumps(value)


class Llama4PythonicToolParser(PythonicToolParser):
    name = "llama4_pythonic"
    STRIP_PYTHON_TAGS = True


def _split_args(text: str, start: int) -> tuple[list[str], int | None]:
    """Top-level comma-separated segments from `start` up to the matching `)` (index or None)."""
    segments, depth, i, seg_start = [], 0, start, start
    quote = None
    n = len(text)
    while i < n:
        ch = text[i]
        if quote is not None:
            if ch == "\\":
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 1
            continue
        if ch in "'\"":
            quote = text[i:i + 3] if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0 and ch == ")":
                segments.append(text[seg_start:i])
                return segments, i
            depth -= 1
        elif ch == "," and depth == 0:
            segments.append(text[seg_start:i])
            seg_start = i + 1
        i += 1
    segments.append(text[seg_start:])
    return segments, None


def _top_level_eq(segment: str) -> int:
    """Index of a keyword's `=` (not `==`, not inside brackets or strings), or -1."""
    head = segment.split("(", 1)[0].split("[", 1)[0].split("{", 1)[0].split("'", 1)[0].split('"', 1)[0]
    i = head.find("=")
    if i == -1 or head[i + 1:i + 2] == "=":
        return -1
    name = head[:i].strip()
    return i if name.isidentifier() and not keyword.iskeyword(name) else -1

