"""`--allowed-origins` CORS, with the semantics of vLLM's (Starlette's CORSMiddleware).

vLLM's flags and defaults: `--allowed-origins` (vLLM: `["*"]`), `--allow-credentials` (off),
`--allowed-methods` (`*`), `--allowed-headers` (`*`). One deviation: with no `--allowed-origins`
we send no CORS headers at all (vLLM's default lets every origin in); pass `--allowed-origins '*'`
for vLLM's behaviour. Preflights (OPTIONS with `Origin` and `Access-Control-Request-Method`) are
answered here, before auth and routing, with 200 `OK` or 400 `Disallowed CORS origin|method|headers`
as Starlette writes them. Actual responses get `Access-Control-Allow-Origin` (plus `Vary: Origin`
when it is not `*`) when the response is prepared, so streamed responses carry it. We also expose
`X-Request-Id` to browser code (`Access-Control-Expose-Headers`), which vLLM does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

ALL_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
SAFELISTED_HEADERS = {"accept", "accept-language", "content-language", "content-type"}
MAX_AGE = "600"
EXPOSED_HEADERS = "X-Request-Id"


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    allow_all_origins: bool
    methods: tuple[str, ...]
    headers: frozenset[str]  # lower case; empty with allow_all_headers
    allow_all_headers: bool
    allow_credentials: bool

    @classmethod
    def build(cls, origins: list[str], methods: list[str], headers: list[str],
              allow_credentials: bool) -> CorsPolicy:
        all_methods = "*" in methods
        return cls(
            origins=frozenset(origins), allow_all_origins="*" in origins,
            methods=ALL_METHODS if all_methods else tuple(m.upper() for m in methods),
            headers=frozenset(h.lower() for h in headers) | SAFELISTED_HEADERS,
            allow_all_headers="*" in headers, allow_credentials=allow_credentials)

    def origin_allowed(self, origin: str) -> bool:
        return self.allow_all_origins or origin in self.origins

    def preflight(self, request: web.Request) -> web.Response:
        origin = request.headers["Origin"]
        method = request.headers["Access-Control-Request-Method"]
        requested = request.headers.get("Access-Control-Request-Headers", "")
        headers = {"Access-Control-Allow-Methods": ", ".join(self.methods), "Access-Control-Max-Age": MAX_AGE}
        if self.allow_credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        failures = []
        if self.origin_allowed(origin):
            if self.allow_all_origins and not self.allow_credentials:
                headers["Access-Control-Allow-Origin"] = "*"
            else:
                headers["Access-Control-Allow-Origin"] = origin
                headers["Vary"] = "Origin"
        else:
            failures.append("origin")
            if not self.allow_all_origins:
                headers["Vary"] = "Origin"
        if method.upper() not in self.methods:
            failures.append("method")
        if self.allow_all_headers:
            if requested:
                headers["Access-Control-Allow-Headers"] = requested
        else:
            headers["Access-Control-Allow-Headers"] = ", ".join(sorted(self.headers))
            asked = [h.strip().lower() for h in requested.split(",") if h.strip()]
            if any(h not in self.headers for h in asked):
                failures.append("headers")
        if failures:
            return web.Response(status=400, text="Disallowed CORS " + ", ".join(failures), headers=headers)
        return web.Response(status=200, text="OK", headers=headers)

    def decorate(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin is None or not self.origin_allowed(origin) or "Access-Control-Allow-Origin" in response.headers:
            return
        if self.allow_all_origins and not self.allow_credentials:
            response.headers["Access-Control-Allow-Origin"] = "*"
        else:
            response.headers["Access-Control-Allow-Origin"] = origin
            vary = response.headers.get("Vary")
            response.headers["Vary"] = f"{vary}, Origin" if vary else "Origin"
        if self.allow_credentials:
            response.headers["Access-Control-Allow-Credentials"] = "true"
        response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS


def _values(values: list[str] | None, default: list[str]) -> list[str]:
    """Space-separated values, or vLLM's JSON-list form (`--allowed-origins '["*"]'`)."""
    out: list[str] = []
    for value in values or []:
        value = value.strip()
        if value.startswith("["):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, list):
                out.extend(str(v) for v in parsed)
                continue
        out.append(value)
    return out or default


def _policy(config: Any) -> CorsPolicy | None:
    origins = _values(getattr(config, "allowed_origins", None), [])
    if not origins:
        return None
    return CorsPolicy.build(origins, _values(getattr(config, "allowed_methods", None), ["*"]),
                            _values(getattr(config, "allowed_headers", None), ["*"]),
                            bool(getattr(config, "allow_credentials", False)))


def middlewares(config: Any) -> list[Any]:
    """The preflight middleware when `--allowed-origins` is set, else nothing."""
    policy = _policy(config)
    if policy is None:
        return []

    @web.middleware
    async def cors_preflight(request: web.Request, handler: Any) -> web.StreamResponse:
        if (request.method == "OPTIONS" and "Origin" in request.headers
                and "Access-Control-Request-Method" in request.headers):
            return policy.preflight(request)
        return await handler(request)

    return [cors_preflight]


def install(app: web.Application, config: Any) -> None:
    """Add `Access-Control-Allow-Origin` to every response of an allowed origin (streams included)."""
    policy = _policy(config)
    if policy is None:
        return

    async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
        policy.decorate(request, response)

    app.on_response_prepare.append(add_headers)
