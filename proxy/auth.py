"""`--api-key`: a Bearer token (or an `x-api-key` header) required on every route except `/health`
and `/metrics`; `--metrics-api-key` / `--metrics-require-api-key`: a key for `/metrics`.

Stricter than vLLM, which only guards paths under `/v1`: here `/tokenize`, `/version`, the render
and derender routes are guarded too, because they expose the served model to whoever can reach the
port. Keys are compared as SHA-256 digests with `hmac.compare_digest`, so neither a key's bytes
nor its length leak through timing. The 401 is an OpenAI error body (the `openai` client raises
`AuthenticationError` on it) with `WWW-Authenticate: Bearer`.

`/metrics` is open by default, because Prometheus scrapers rarely carry the API's key; it names
the engines (their URLs label the engine series) and shows the traffic. `--metrics-api-key KEY`
makes it require that key (a scraper-only credential: `authorization: {credentials: KEY}` in a
Prometheus scrape config), `--metrics-require-api-key` makes it accept the main `--api-key`
(with both, either key works). `/health` always stays open for load balancers.

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
from proxy.metrics import METRICS_PATH

OPEN_PATHS = frozenset({"/health", METRICS_PATH})  # without --api-key's key (/metrics: see above)
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


def _key_check(keys: list[str]) -> Any:
    """A constant-time check of a request's Bearer token, or its `x-api-key` header (the anthropic
    SDK's), against `keys`: every key is compared with both, even without a header, so "no header",
    "wrong key" and which key matched take the same time."""
    digests = [_digest(key) for key in keys]

    def check(request: web.Request) -> bool:
        token = bearer_token(request.headers.get("Authorization"))
        x_api_key = request.headers.get("x-api-key") or None
        got, got_x = _digest(token or ""), _digest(x_api_key or "")
        ok = ok_x = False
        for digest in digests:
            ok |= hmac.compare_digest(got, digest)
            ok_x |= hmac.compare_digest(got_x, digest)
        return (ok and token is not None) or (ok_x and x_api_key is not None)

    return check


def middlewares(api_key: str | None, *, metrics_api_key: str | None = None,
                metrics_require_api_key: bool = False) -> list[Any]:
    """The auth middleware when any key is configured, else nothing (no per-request cost)."""
    if metrics_require_api_key and not api_key:
        raise ValueError("--metrics-require-api-key needs --api-key")
    metrics_keys = [k for k in (metrics_api_key, api_key if metrics_require_api_key else None) if k]
    if not api_key and not metrics_keys:
        return []
    api_ok = _key_check([api_key]) if api_key else None
    metrics_ok = _key_check(metrics_keys) if metrics_keys else None

    @web.middleware
    async def require_api_key(request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if path == METRICS_PATH:
            check = metrics_ok
        else:
            check = None if path in OPEN_PATHS else api_ok
        if check is not None and not check(request):
            return unauthorized(path)
        return await handler(request)

    return [require_api_key]
