"""A client's request body: read in bounded time, decoded, bounded in size, failures as OpenAI errors.

* Time: the whole body must arrive within `--request-body-timeout` seconds of the handler asking
  for it (default 30). Without it, a client announcing a large body and then sending a byte every
  few seconds holds a connection, a socket and a handler for as long as it likes, and a thousand
  of them exhaust the process's file descriptors (nginx bounds this with `client_body_timeout`,
  Apache with mod_reqtimeout). A late body is a 408 error body, and the connection is closed
  right after it.
* Content-Encoding: the proxy's app turns aiohttp's own decoding off (`HANDLER_ARGS`), because
  aiohttp answers a coding it cannot decode (`br`, `zstd` without their packages) with a
  plain-text 400 before any handler runs, and a body that fails to decode with an exception in
  the handler. Here `identity`, `gzip` (`x-gzip`) and `deflate` are decoded, their decoded size
  bounded by `--max-request-bytes` (a small gzip bomb never becomes gigabytes), a broken body is
  a 400, any other coding a 415, each with an OpenAI error body. (vLLM reads the bytes as they
  come, so a compressed body is a JSON decode error there.)
* A client that goes away while sending is a cancelled request (a 499 in the access log), not
  a server error.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass

from aiohttp import web

from core.errors import RequestError, shown

DEFAULT_BODY_TIMEOUT = 30.0
# aiohttp's request handler settings for our apps (web.Application(handler_args=...))
HANDLER_ARGS = {"auto_decompress": False}
_INLINE_DECODE_BYTES = 64 * 1024  # larger compressed bodies are inflated off the event loop
_MAX_CODINGS = 4


class BodyTimeout(RequestError):
    """The body did not arrive in time: the 408 is sent, then the connection closed at once (the
    client is still sending; reading on to keep the connection would serve only it)."""


@dataclass(frozen=True)
class BodySettings:
    timeout: float = DEFAULT_BODY_TIMEOUT  # seconds for the whole body; 0: no limit
    decode: bool = False  # the app turned aiohttp's decoding off (HANDLER_ARGS): Content-Encoding is ours


BODY_SETTINGS: web.AppKey[BodySettings] = web.AppKey("body_settings", BodySettings)


def install(app: web.Application, *, timeout: float = DEFAULT_BODY_TIMEOUT) -> None:
    """For an app created with `handler_args=HANDLER_ARGS`: the body timeout, and decoding here."""
    app[BODY_SETTINGS] = BodySettings(timeout=timeout, decode=True)


async def read_body(request: web.Request) -> bytes:
    """The decoded body, at most `request.client_max_size` bytes (413), within the body timeout (408)."""
    settings = request.app.get(BODY_SETTINGS) or BodySettings()
    try:
        if request.content.is_eof():  # all of it arrived with the headers (most bodies): nothing to wait for
            raw = await request.read()
        else:
            async with asyncio.timeout(settings.timeout or None):
                raw = await request.read()  # bounded by the app's client_max_size (--max-request-bytes)
    except TimeoutError:
        raise BodyTimeout(f"The request body did not arrive within {settings.timeout:g} seconds.", 408,
                          "RequestTimeout") from None
    except web.RequestPayloadError as exc:  # aiohttp decoding for the app (not ours), or a body cut short
        raise RequestError(f"The request body could not be read: {shown(str(exc).strip() or 'cut short')}", 400,
                           "BadRequestError") from None
    except ConnectionResetError:  # the client went away mid-body: nobody to answer
        raise asyncio.CancelledError() from None
    codings = request.headers.get("Content-Encoding") if settings.decode else None
    if not codings or codings.strip().lower() == "identity":
        return raw
    if len(raw) <= _INLINE_DECODE_BYTES:
        return decode(raw, codings, request.client_max_size)
    # zlib releases the GIL while it inflates: other requests go on meanwhile
    return await asyncio.get_running_loop().run_in_executor(None, decode, raw, codings, request.client_max_size)


def decode(body: bytes, codings: str, limit: int) -> bytes:
    """`body` with its Content-Encoding `codings` undone (last applied, first undone)."""
    names = [name.strip().lower() for name in codings.split(",") if name.strip()]
    if len(names) > _MAX_CODINGS:
        raise _unsupported(codings)
    for name in reversed(names):
        if name == "identity":
            continue
        if name in ("gzip", "x-gzip"):
            body = _inflate(body, 16 + zlib.MAX_WBITS, name, limit)
        elif name == "deflate":
            # RFC 9110's deflate is zlib-wrapped; some clients send raw deflate (aiohttp accepts both)
            body = _inflate(body, zlib.MAX_WBITS if body[:1] and body[0] & 0x0F == 8 else -zlib.MAX_WBITS,
                            name, limit)
        else:
            raise _unsupported(name)
    return body


def _unsupported(name: str) -> RequestError:
    return RequestError(f"Content-Encoding {shown(name, quote=True)} is not supported: send the body "
                        "uncompressed (identity), or as gzip or deflate.", 415, "UnsupportedMediaType")


def _inflate(data: bytes, wbits: int, name: str, limit: int) -> bytes:
    out: list[bytes] = []
    size = 0
    while True:  # gzip allows several members one after the other
        inflater = zlib.decompressobj(wbits)
        try:
            part = inflater.decompress(data, limit + 1 - size)
        except zlib.error:
            raise RequestError(f"The request body is not valid {name} data (Content-Encoding: {name}).", 400,
                               "BadRequestError") from None
        size += len(part)
        if size > limit or inflater.unconsumed_tail:
            raise RequestError(f"Request body is too large. Decoded ({name}), it passes the limit of {limit} "
                               "bytes.", 413, "RequestEntityTooLarge")
        if not inflater.eof:
            raise RequestError(f"The request body is cut short: its {name} data does not end.", 400,
                               "BadRequestError")
        out.append(part)
        data = inflater.unused_data
        if not data or wbits != 16 + zlib.MAX_WBITS:
            break
    return out[0] if len(out) == 1 else b"".join(out)
