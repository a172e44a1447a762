"""OpenAI-style errors, as vLLM writes them.

Every failure a client can cause is a `RequestError`: the I/O layer turns it into
`{"error": {"message", "type", "param", "code"}}` with the HTTP status equal to `code`
(spec section 1). Core code raises these and nothing else for client mistakes, so the
proxy never has to guess a status from an arbitrary exception.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# vLLM's sanitizer: memory addresses and file paths never reach a client.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_PATH = re.compile(r"(?:/[\w.\-]+){2,}")


def sanitize(message: str) -> str:
    message = _ADDRESS.sub("<address>", message)
    return _PATH.sub("<path>", message)


class RequestError(Exception):
    """A client-caused failure with its HTTP status and OpenAI error `type`."""

    def __init__(self, message: str, status: int = 400, type: str = "BadRequestError",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.status, self.param)


def error_body(message: str, type: str, code: int, param: str | None = None) -> dict[str, Any]:
    # key order is part of the wire format: message, type, param, code
    return {"error": {"message": sanitize(message), "type": type, "param": param, "code": code}}


def error_json(message: str, type: str, code: int, param: str | None = None) -> bytes:
    return orjson.dumps(error_body(message, type, code, param))


def bad_request(message: str, param: str | None = None) -> RequestError:
    return RequestError(message, 400, "BadRequestError", param)


def model_not_found(model: str, aliases: list[str]) -> RequestError:
    return RequestError(
        f"The model `{model}` does not exist. Valid aliases: {', '.join(aliases)}.",
        404, "NotFoundError", "model")


def validation_error(errors: list[dict[str, Any]]) -> RequestError:
    """A pydantic ValidationError's `errors()` in vLLM's 400 shape (spec 1).

    vLLM lists at most 10 errors, cuts each echoed input to 200 chars, and names the
    first error's location (without the leading `body`) as `param`.
    """
    n = len(errors)
    lines = [f"{n} validation error{'s' if n != 1 else ''}:"]
    for err in errors[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid value")
        text = f"{loc}: {msg}" if loc else msg
        if "input" in err and err.get("type") not in ("missing",):
            shown = repr(err["input"])
            if len(shown) > 200:
                shown = shown[:200] + "..."
            text += f" (input: {shown})"
        lines.append("  " + text)
    param = None
    if errors:
        loc = [str(p) for p in errors[0].get("loc", ())]
        param = ".".join(["body", *loc]) if loc else None
    return RequestError("\n".join(lines), 400, "Bad Request", param)
