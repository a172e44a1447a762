"""`--api-key`: a Bearer token (or an `x-api-key` header) required on every route except `/health` and `/metrics`.

Stricter than vLLM, which only guards paths under `/v1`: here `/tokenize`, `/version`, the render
and derender routes are guarded too, because they expose the served model to whoever can reach the
port. The key is compared as SHA-256 digests with `hmac.compare_digest`, so neither the key's bytes
nor its length leak through timing. The 401 is an OpenAI error body (the `openai` client raises
`AuthenticationError` on it) with `WWW-Authenticate: Bearer`.

`x-api-key: KEY` (what the anthropic SDK sends; vLLM reads only the Bearer token) is accepted as
well; on the Anthropic routes (`ANTHROPIC_PATHS`) the 401 is Anthropic's error body.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson
from aiohttp import web

from core.errors import error_json
from core.protocol.messages import anthropic_error_body

OPEN_PATHS = frozenset({"/health", "/metrics"})
ANTHROPIC_PATHS = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
UNAUTHORIZED_MESSAGE = ("Unauthorized: missing or invalid API key (send 'Authorization: Bearer <key>' "
                        "or 'x-api-key: <key>').")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), else None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def unauthorized(path: str = "") -> web.Response:
    body = (orjson.dumps(anthropic_error_body(UNAUTHORIZED_MESSAGE, 401)) if path in ANTHROPIC_PATHS
            else error_json(UNAUTHORIZED_MESSAGE, "Unauthorized", 401))
    return web.Response(status=401, body=body, content_type="application/json",
                        headers={"WWW-Authenticate": "Bearer"})


def middlewares(api_key: str | None) -> list[Any]:
    """The auth middleware when a key is configured, else nothing (no per-request cost)."""
    if not api_key:
        return []
    expected = _digest(api_key)

    @web.middleware
    async def require_api_key(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        token = bearer_token(request.headers.get("Authorization"))
        x_api_key = request.headers.get("x-api-key") or None
        # always compare both, even without a header, so "no header" and "wrong key" take the same time
        ok = hmac.compare_digest(_digest(token or ""), expected) and token is not None
        ok_x = hmac.compare_digest(_digest(x_api_key or ""), expected) and x_api_key is not None
        if not (ok or ok_x):
            return unauthorized(request.path)
        return await handler(request)

    return [require_api_key]
