"""OpenAI-style errors, as vLLM writes them.

Every failure a client can cause is a `RequestError`: the I/O layer turns it into
`{"error": {"message", "type", "param", "code"}}` with the HTTP status equal to `code`
(docs/vllm-wire-spec.md §1). Core code raises these and nothing else for client mistakes, so the
proxy never has to guess a status from an arbitrary exception.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# vLLM's sanitizer (exception_handling/utils.py): memory addresses, traceback lines and file
# paths never reach a client; the message is stripped. Paths are hidden as vLLM hides them (a
# path through /home, /usr, /opt, /var, /tmp, /root, /lib, /mnt or /srv from there on; a
# `dir/name.ext` path), with two differences: a URL or the target of a request line
# ("GET /v1/models/Qwen/Qwen3-0.6B") is never touched, and an extension must start with a
# letter (`.py`, `.json`, `.so`), so model ids with versions and sizes (`org/team/Llama-3.1-8B`,
# where vLLM reads `.6B` as an extension) are left alone. Linear in the message's length (vLLM's
# patterns backtrack quadratically on a long run of `/a/a/a...`).
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
# (a match starts where a run of white space starts: searching from inside the run is quadratic)
_TRACEBACK = re.compile(r'(?<!\s)\s*File "[^"]+", line \d+, in \S+(\n\s+.*)?')
_PATH_RUN = re.compile(r"(?:/[\w.\-]+)+")
_SYSTEM_DIRS = frozenset({"home", "usr", "opt", "var", "tmp", "root", "lib", "mnt", "srv"})
_EXTENSION = re.compile(r"[A-Za-z]\w*")
# kept as they are: URLs (scheme://...) and the target of an HTTP request line ("GET /path")
_URL_OR_TARGET = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s'\"`<>]*"
    r"|\b(?:GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS|CONNECT|TRACE) /[^\s'\"`<>]*")


def _hide_path(match: re.Match[str]) -> str:
    run = match.group()
    path = run.rstrip(".")  # a sentence's full stop is not part of the path
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments[:-1]):
        if segment in _SYSTEM_DIRS:  # /usr/lib/...: everything from the system directory on
            return "".join("/" + s for s in segments[:i]) + "<path>" + run[len(path):]
    name = segments[-1]
    if len(segments) >= 2 and "." in name and _EXTENSION.fullmatch(name.rsplit(".", 1)[1]):
        first = len(segments) - 1  # the directories before the file name, as far back as they have no dot
        while first > 0 and "." not in segments[first - 1]:
            first -= 1
        if first < len(segments) - 1:
            return "".join("/" + s for s in segments[:first]) + "<path>" + run[len(path):]
    return run


def _hide_paths(text: str) -> str:
    return _PATH_RUN.sub(_hide_path, text)


def sanitize(message: str) -> str:
    message = _ADDRESS.sub(">", message)
    message = _TRACEBACK.sub("", message)
    if "/" in message:
        parts, last = [], 0
        for url in _URL_OR_TARGET.finditer(message):
            parts += [_hide_paths(message[last:url.start()]), url.group()]
            last = url.end()
        parts.append(_hide_paths(message[last:]))
        message = "".join(parts)
    return message.strip()


class RequestError(Exception):
    """A client-caused failure with its HTTP status and OpenAI error `type`."""

    def __init__(self, message: str, status: int = 400, type: str = "BadRequestError",
                 param: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.retry_after = retry_after  # seconds: a Retry-After header on 503s (overload, engines down)

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.status, self.param)


# no error message carries more than this (a message that quotes a prompt or a value stays readable;
# a client never gets megabytes back for the megabytes it sent)
MAX_MESSAGE_CHARS = 16_384
MAX_SHOWN_CHARS = 200  # a client's value quoted in a message
_TRUNCATED = "...[truncated]"


def error_body(message: str, type: str, code: int, param: str | None = None) -> dict[str, Any]:
    # key order is part of the wire format: message, type, param, code
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + _TRUNCATED
    if param is not None and len(param) > MAX_SHOWN_CHARS:
        param = param[:MAX_SHOWN_CHARS] + _TRUNCATED
    return {"error": {"message": sanitize(message), "type": type, "param": param, "code": code}}


def _is_small(value: Any, budget: int = 64, depth: int = 8) -> bool:
    """Whether `value` has at most `budget` nested items and `depth` levels (without recursing:
    a client's value can be nested as deep as the JSON parser allows)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, tuple, set, frozenset, dict)):
            if level >= depth:
                return False
            budget -= len(item)
            if budget < 0:
                return False
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
        elif isinstance(item, str) and len(item) > MAX_SHOWN_CHARS:
            return False
    return True


def shown(value: Any, quote: bool = False, limit: int = MAX_SHOWN_CHARS) -> str:
    """A client's value as vLLM puts it in a message (`str`, or `repr` with `quote`), but never
    longer than `limit` characters and never recursing into a deeply nested value: small values
    read exactly as vLLM writes them, large ones are cut or described."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"<int of {value.bit_length()} bits>"  # (str() refuses ints past 4300 digits anyway)
    if isinstance(value, str):
        text = value if len(value) <= limit else value[:limit]
        text = repr(text) if quote else text
        return text if len(value) <= limit else text + _TRUNCATED
    if isinstance(value, (list, tuple, set, frozenset, dict)) and not _is_small(value):
        return f"<{type(value).__name__} of {len(value)} items>"
    try:
        text = repr(value) if quote else str(value)
    except Exception:  # (a value only our own code could build; kept total for safety)
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + _TRUNCATED


def error_json(message: str, type: str, code: int, param: str | None = None) -> bytes:
    return orjson.dumps(error_body(message, type, code, param))


def bad_request(message: str, param: str | None = None) -> RequestError:
    return RequestError(message, 400, "BadRequestError", param)


def model_not_found(model: str, aliases: list[str]) -> RequestError:
    return RequestError(
        f"The model `{shown(model)}` does not exist. Valid aliases: {', '.join(aliases)}.",
        404, "NotFoundError", "model")


NESTED_TOO_DEEPLY = "The request is nested too deeply to be processed."


_MAX_REPORTED_ERRORS = 10
_MAX_ERROR_INPUT_CHARS = 200
_MAX_ERROR_CHARS = 1000
# pydantic-core's schema-kind names that show up in `loc` but are not field names
_INTERNAL_LOC_MARKERS = frozenset({
    "function-wrap", "function-after", "function-before", "function-plain", "json-or-python",
    "lax-or-strict", "chain", "default", "nullable", "tagged-union", "union", "call", "arguments",
    "is-instance", "is-subclass", "callable", "str", "int", "float", "bool", "bytes", "bytearray",
    "list", "tuple", "dict", "set", "frozenset", "complex", "none", "nonetype"})
_BRACKETED = re.compile(r"[\[\]{}()]")


def _summarize_input(value: Any) -> Any:
    """vLLM never echoes a large input: containers are described, long strings cut."""
    if isinstance(value, str):
        return value[:_MAX_ERROR_INPUT_CHARS] + "...[truncated]" if len(value) > _MAX_ERROR_INPUT_CHARS else value
    if isinstance(value, (bytes, bytearray)):
        return f"<{type(value).__name__} of {len(value)} bytes>"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"<{type(value).__name__} of {len(value)} items>"
    try:
        text = str(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text[:_MAX_ERROR_INPUT_CHARS] + "...[truncated]" if len(text) > _MAX_ERROR_INPUT_CHARS else text


def clean_loc(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic `loc` as vLLM's dotted `param` (`body.messages.0`), internal markers dropped."""
    parts = [str(p) for p in loc if not (_BRACKETED.search(str(p)) or str(p).lower() in _INTERNAL_LOC_MARKERS)]
    return ".".join(parts) if parts else ".".join(str(p) for p in loc)


def validation_error(errors: list[dict[str, Any]], prefix: tuple[str, ...] = ("body",)) -> RequestError:
    """A pydantic ValidationError's `errors(include_url=False)` in vLLM's 400 shape (docs/vllm-wire-spec.md §1).

    vLLM (FastAPI's RequestValidationError handler) prints each error dict with its `loc`
    cleaned and prefixed with `body`, its `input` summarized, at most 10 of them, and names the
    first error's location as `param`.
    """
    if not errors:
        return RequestError("Validation error", 400, "Bad Request")
    count = len(errors)
    label = "error" if count == 1 else "errors"
    lines = [f"{count} validation {label}:"]
    for err in errors[:_MAX_REPORTED_ERRORS]:
        shown = dict(err)
        shown.pop("url", None)
        if "input" in shown:
            shown["input"] = _summarize_input(shown["input"])
        shown["loc"] = clean_loc((*prefix, *tuple(shown.get("loc", ()))))
        text = str(shown)
        if len(text) > _MAX_ERROR_CHARS:
            text = text[:_MAX_ERROR_CHARS] + "...[truncated]"
        lines.append("  " + text)
    if count > _MAX_REPORTED_ERRORS:
        lines.append(f"  ...and {count - _MAX_REPORTED_ERRORS} more {label}")
    param = clean_loc((*prefix, *tuple(errors[0].get("loc", ()))))
    return RequestError("\n".join(lines).rstrip(), 400, "Bad Request", param)
