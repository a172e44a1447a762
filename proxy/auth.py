"""`--api-key`: a Bearer token required on every route except `/health` and `/metrics`.

Stricter than vLLM, which only guards paths under `/v1`: here `/tokenize`, `/version`, the render
and derender routes are guarded too, because they expose the served model to whoever can reach the
port. The key is compared as SHA-256 digests with `hmac.compare_digest`, so neither the key's bytes
nor its length leak through timing. The 401 is an OpenAI error body (the `openai` client raises
`AuthenticationError` on it) with `WWW-Authenticate: Bearer`.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from aiohttp import web

from core.errors import error_json

OPEN_PATHS = frozenset({"/health", "/metrics"})
UNAUTHORIZED_MESSAGE = "Unauthorized: missing or invalid API key (send 'Authorization: Bearer <key>')."


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


def unauthorized() -> web.Response:
    return web.Response(status=401, body=error_json(UNAUTHORIZED_MESSAGE, "Unauthorized", 401),
                        content_type="application/json", headers={"WWW-Authenticate": "Bearer"})


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
        # always compare, even without a token, so "no header" and "wrong key" take the same time
        ok = hmac.compare_digest(_digest(token or ""), expected)
        if not ok or token is None:
            return unauthorized()
        return await handler(request)

    return [require_api_key]
