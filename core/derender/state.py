"""`stream_state`: our compact, versioned, validated (optionally signed) per-choice state.

vLLM's streaming derender state either re-sends the whole output (parser path: O(n) per call)
or a token-string window; ours (docs/vllm-wire-spec.md §0.3) is an opaque string the client echoes back:

    "ds1." + base64url(orjson(payload)) [+ "." + base64url(HMAC-SHA256(secret, "ds1." + payload))]

The payload is a small dict (see `StreamState`): the detokenizer window ids and offsets, the
stop-string tail, counters, the last 4 sampled ids for logprob repair, and the parser state.
Nothing in it grows with the output, so it stays well under 2 KB (the parser state is bounded
by the current tool call, a held stop-string tail by the longest stop string), but in the rare
modes core/parsers/README.md "State size" lists (e.g. a reasoning nemotron_v3 may repeat).

Anything wrong with a state is a 400 `invalid stream_state: <why>`, never a 500: not a
string, too large, unknown version, bad signature, undecodable, malformed fields, issued by a
server with another model/parser configuration (`foreign`), or for another endpoint, request
or choice index (`mismatched`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import orjson

from core.errors import RequestError, bad_request

VERSION_PREFIX = "ds1."
MAX_STATE_CHARS = 1 << 20  # a parser state holding a huge tool call could get large; refuse beyond
_SIG_BYTES = 16


def invalid(reason: str) -> RequestError:
    return bad_request(f"invalid stream_state: {reason}")


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def server_fingerprint(*parts: Any) -> str:
    """A short digest of what makes states interchangeable (model, tokenizer, parser flags)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=6).hexdigest()


def request_fingerprint(request_id: str | None) -> str:
    """Digest of the engine request id ("" when the chunk carried none: nothing to compare)."""
    if not request_id:
        return ""
    return hashlib.blake2b(request_id.encode(), digest_size=6).hexdigest()


@dataclass
class StreamState:
    """The decoded payload. `kind`: "chat" | "cmpl"."""

    kind: str
    server: str
    request: str
    index: int | None
    decoder: Any            # core.derender.text.TextDecoder.to_state()
    role_sent: bool = False
    logprob_context: list[int] | None = None
    text_offset: int = 0
    output_tokens: int = 0
    parser: Any = None      # ChatOutputParser state (a JSON dict) or None

    def to_payload(self) -> dict[str, Any]:
        return {"k": self.kind, "s": self.server, "q": self.request, "i": self.index, "d": self.decoder,
                "r": self.role_sent, "c": self.logprob_context or [], "o": self.text_offset,
                "n": self.output_tokens, "p": self.parser}


class StateCodec:
    def __init__(self, secret: str | None = None) -> None:
        self._key = secret.encode() if secret else None

    def _sign(self, body: str) -> str:
        assert self._key is not None
        return _b64encode(hmac.new(self._key, body.encode(), hashlib.sha256).digest()[:_SIG_BYTES])

    def encode(self, state: StreamState) -> str:
        body = VERSION_PREFIX + _b64encode(orjson.dumps(state.to_payload()))
        if self._key is not None:
            return body + "." + self._sign(body)
        return body

    def decode(self, value: Any, *, kind: str, server: str, request: str) -> StreamState:
        if not isinstance(value, str):
            raise invalid("expected the opaque string a previous call returned")
        if len(value) > MAX_STATE_CHARS:
            raise invalid("too large")
        if not value.startswith(VERSION_PREFIX):
            raise invalid("unknown format or version")
        body, _, signature = value.partition(".")[2].partition(".")
        signed_part = VERSION_PREFIX + body
        if self._key is not None:
            # compare bytes: compare_digest refuses non-ASCII str, and a forged signature may be anything
            if not signature or not hmac.compare_digest(signature.encode("utf-8", "surrogatepass"),
                                                        self._sign(signed_part).encode()):
                raise invalid("signature mismatch (tampered, or signed with another secret)")
        try:
            payload = orjson.loads(_b64decode(body))
        except (binascii.Error, ValueError):
            raise invalid("not decodable (truncated or garbled)") from None
        state = _parse(payload)
        if state.server != server:
            raise invalid("issued by a server with another model or parser configuration")
        if state.kind != kind:
            raise invalid(f"issued by the {'chat' if state.kind == 'chat' else 'completions'} derender endpoint")
        if state.request and request and state.request != request:
            raise invalid("belongs to another request (generate_chunk.request_id differs)")
        return state


def _parse(payload: Any) -> StreamState:
    if not isinstance(payload, dict):
        raise invalid("malformed (not an object)")
    try:
        kind, server, request = payload["k"], payload["s"], payload["q"]
        index, decoder, role_sent = payload["i"], payload["d"], payload["r"]
        context, offset, count, parser = payload["c"], payload["o"], payload["n"], payload["p"]
    except KeyError as exc:
        raise invalid(f"malformed (missing {exc.args[0]!r})") from None
    if kind not in ("chat", "cmpl") or not isinstance(server, str) or not isinstance(request, str):
        raise invalid("malformed (header)")
    if index is not None and (not _is_int(index) or index < 0):
        raise invalid("malformed (choice index)")
    if not isinstance(role_sent, bool):
        raise invalid("malformed (role flag)")
    if not (isinstance(context, list) and len(context) <= 4 and all(_is_int(t) and t >= 0 for t in context)):
        raise invalid("malformed (logprob context)")
    if not (_is_int(offset) and offset >= 0 and _is_int(count) and count >= 0):
        raise invalid("malformed (counters)")
    if parser is not None and not isinstance(parser, dict):
        raise invalid("malformed (parser state)")
    return StreamState(kind=kind, server=server, request=request, index=index, decoder=decoder,
                       role_sent=role_sent, logprob_context=context, text_offset=offset,
                       output_tokens=count, parser=parser)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
