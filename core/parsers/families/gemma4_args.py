"""Gemma 4's call arguments: `call:name{key:VALUE,...}` read as vLLM 0.33's `_gemma4_arg_converter`.

    location:<|"|>San Francisco<|"|>,unit:<|"|>celsius<|"|>
    count:42,flag:true,nested:{inner:<|"|>v<|"|>},items:[<|"|>a<|"|>,1]

* strings sit between `<|"|>` delimiters (one special token, kept as text by the engine); one
  never closed runs to the end (of the object or array it was found in);
* bare values (numbers, booleans, anything else) are read up to `,`, `}` or `]` (`,` or `]` in an
  array) and kept as *strings*: only the tool's schema gives them a type (core/parsers/coercion.py);
* `{...}` / `[...]` nest (brackets inside strings do not count); one never closed is read as far
  as it goes, a bare value at its end withheld (vLLM's partial mode);
* a key is the text up to `:`, stripped, `<|"|>` around it removed; a key at the end of the text
  gets ""; a value that starts with `,`, `}` or `]` ends the reading (vLLM's "no progress");
* the call body's closer is dropped first: a trailing `}`, or a trailing `)` when the body has
  more `)` than `(` (the `call:name(...)` spelling).

Only the complete call is converted (the arguments stream when the call ends), so vLLM's
streaming-only tail rules (a partial delimiter, a number ending in `.`) are not needed here.
"""

from __future__ import annotations

from typing import Any

from core.parsers.jsonstream import dumps

DELIM = '<|"|>'
_D = len(DELIM)
_SKIP = " ,\n\t"
_SPACE = " \n\t"


def _group_end(s: str, i: int, opener: str, closer: str) -> tuple[int, bool]:
    """From just inside `opener`: the index after the matching `closer` (strings skipped)."""
    depth, n = 1, len(s)
    while i < n:
        if s.startswith(DELIM, i):
            close = s.find(DELIM, i + _D)
            i = n if close == -1 else close + _D
            continue
        ch = s[i]
        i += 1
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i, True
    return n, False


def _nested(s: str, i: int) -> tuple[Any, int]:
    """The object or array opening at `s[i]`, and the index after it."""
    opener = s[i]
    closer, parse = ("}", parse_fields) if opener == "{" else ("]", parse_array)
    end, closed = _group_end(s, i + 1, opener, closer)
    return parse(s[i + 1:end - 1] if closed else s[i + 1:end], partial=not closed), end


def _bare(s: str, i: int, stops: str, partial: bool) -> tuple[str | None, int]:
    """A bare value from `i` to the next stop character; None ends the reading."""
    j, n = i, len(s)
    while j < n and s[j] not in stops:
        j += 1
    if (partial and j >= n) or j == i:
        return None, j
    raw = s[i:j].strip()
    return (None if partial and raw.endswith(".") else raw), j


def parse_fields(s: str, partial: bool = False) -> dict[str, Any]:
    """`key:value,...` into a dict (vLLM's `_parse_gemma4_args`)."""
    out: dict[str, Any] = {}
    i, n = 0, len(s)
    while i < n:
        while i < n and s[i] in _SKIP:
            i += 1
        colon = s.find(":", i)
        if i >= n or colon == -1:
            break
        key = s[i:colon].strip()
        if key.startswith(DELIM) and key.endswith(DELIM):
            key = key[_D:-_D]
        i = colon + 1
        while i < n and s[i] in _SPACE:
            i += 1
        if i >= n:
            if not partial:
                out[key] = ""
            break
        if s.startswith(DELIM, i):
            close = s.find(DELIM, i + _D)
            if close == -1:  # never closed: the rest (a streaming-only tail rule aside)
                out[key] = _strip_partial_delim(s[i + _D:]) if partial else s[i + _D:]
                break
            out[key], i = s[i + _D:close], close + _D
        elif s[i] in "{[":
            out[key], i = _nested(s, i)
        else:
            value, i = _bare(s, i, ",}]", partial)
            if value is None:
                break
            out[key] = value
    return out


def parse_array(s: str, partial: bool = False) -> list[Any]:
    """`value,...` into a list (vLLM's `_parse_gemma4_array`)."""
    out: list[Any] = []
    i, n = 0, len(s)
    while i < n:
        while i < n and s[i] in _SKIP:
            i += 1
        if i >= n:
            break
        if s.startswith(DELIM, i):
            close = s.find(DELIM, i + _D)
            if close == -1:
                out.append(s[i + _D:])
                break
            out.append(s[i + _D:close])
            i = close + _D
        elif s[i] in "{[":
            value, i = _nested(s, i)
            out.append(value)
        else:
            value, i = _bare(s, i, ",]", partial)
            if value is None:
                break
            out.append(value)
    return out


def _strip_partial_delim(value: str) -> str:
    for k in range(_D, 0, -1):
        if value.endswith(DELIM[:k]):
            return value[:-k]
    return value


def gemma4_arguments(raw: str) -> str:
    """A complete call's raw argument text as JSON (vLLM's converter, non-partial)."""
    text = raw.strip()
    if text.endswith("}") or (text.endswith(")") and text.count("(") < text.count(")")):
        text = text[:-1]
    try:
        return dumps(parse_fields(text))
    except RecursionError:  # (nesting deeper than Python's stack: vLLM fails the request; we never raise)
        return "{}"
