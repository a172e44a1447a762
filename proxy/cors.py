"""CORS as `vllm serve` does it: Starlette's CORSMiddleware (the version vLLM 0.33 ships), always on.

vLLM 0.33's flags and defaults: `--allowed-origins` (none: "cross-origin browser access is
disabled by default"; older releases, 0.11 for one, allowed `["*"]`), `--allow-credentials` (off),
`--allowed-methods` (`*`), `--allowed-headers` (`*`). Lists are taken in vLLM's JSON form (`--allowed-origins
'["*"]'`) or space-separated (`--allowed-origins https://a.example https://b.example`).

Like vLLM, the middleware runs even with no origin allowed, so a browser's preflight gets
Starlette's answer (400 `Disallowed CORS origin`), never a 405. Preflights (OPTIONS with `Origin`
and `Access-Control-Request-Method`) are answered here, before auth and routing, with Starlette's
headers and `OK` / `Disallowed CORS <what>` bodies. Other responses to a request with `Origin`
get Starlette's headers when they are prepared, so streamed responses carry them. One addition:
an allowed origin may read `X-Request-Id` (`Access-Control-Expose-Headers`), which vLLM does not
expose.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

ALL_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY")
SAFELISTED_HEADERS = frozenset({"Accept", "Accept-Language", "Content-Language", "Content-Type"})
MAX_AGE = "600"
PREFLIGHT_VARY = ("Origin, Access-Control-Request-Method, Access-Control-Request-Headers, "
                  "Access-Control-Request-Private-Network")
EXPOSED_HEADERS = "X-Request-Id"


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    allow_all_origins: bool
    methods: tuple[str, ...]
    headers: frozenset[str]  # lower case, the safelisted ones included
    allow_all_headers: bool
    allow_credentials: bool
    preflight_headers: tuple[tuple[str, str], ...]
    simple_headers: tuple[tuple[str, str], ...]

    @classmethod
    def build(cls, origins: list[str], methods: list[str], headers: list[str],
              allow_credentials: bool) -> CorsPolicy:
        allow_all_origins = "*" in origins
        allow_all_headers = "*" in headers
        method_list = ALL_METHODS if "*" in methods else tuple(methods)
        allowed_headers = sorted(SAFELISTED_HEADERS | set(headers))
        preflight = {"Vary": PREFLIGHT_VARY}
        if allow_all_origins and not allow_credentials:
            preflight["Access-Control-Allow-Origin"] = "*"
        preflight["Access-Control-Allow-Methods"] = ", ".join(method_list)
        preflight["Access-Control-Max-Age"] = MAX_AGE
        if not allow_all_headers:
            preflight["Access-Control-Allow-Headers"] = ", ".join(allowed_headers)
        simple = {}
        if allow_all_origins:
            simple["Access-Control-Allow-Origin"] = "*"
        if allow_credentials:
            preflight["Access-Control-Allow-Credentials"] = simple["Access-Control-Allow-Credentials"] = "true"
        return cls(
            origins=frozenset(origins), allow_all_origins=allow_all_origins, methods=method_list,
            headers=frozenset(h.lower() for h in allowed_headers), allow_all_headers=allow_all_headers,
            allow_credentials=allow_credentials, preflight_headers=tuple(preflight.items()),
            simple_headers=tuple(simple.items()))

    @property
    def explicit_origin(self) -> bool:
        """Whether an allowed origin is named back (not `*`): specific origins, or credentials."""
        return not self.allow_all_origins or self.allow_credentials

    def origin_allowed(self, origin: str) -> bool:
        return self.allow_all_origins or origin in self.origins

    def preflight(self, request: web.Request) -> web.Response:
        origin = request.headers["Origin"]
        method = request.headers["Access-Control-Request-Method"]
        requested = request.headers.get("Access-Control-Request-Headers")
        headers = dict(self.preflight_headers)
        failures = []
        if self.origin_allowed(origin):
            if self.explicit_origin:
                headers["Access-Control-Allow-Origin"] = origin
        else:
            failures.append("origin")
        if method not in self.methods:
            failures.append("method")
        if self.allow_all_headers and requested is not None:
            headers["Access-Control-Allow-Headers"] = requested
        elif requested is not None:
            if any(h.strip() not in self.headers for h in requested.lower().split(",")):
                failures.append("headers")
        if "Access-Control-Request-Private-Network" in request.headers:
            failures.append("private-network")  # (vLLM never allows it)
        if failures:
            return web.Response(status=400, text="Disallowed CORS " + ", ".join(failures), headers=headers)
        return web.Response(status=200, text="OK", headers=headers)

    def decorate(self, request: web.Request, response: web.StreamResponse) -> None:
        headers = response.headers
        origin = request.headers.get("Origin")
        if origin is not None:
            if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
                return  # a preflight: answered whole by `preflight`
            headers.update(self.simple_headers)
            if self.origin_allowed(origin):
                if self.explicit_origin:
                    headers["Access-Control-Allow-Origin"] = origin
                headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
        # (Starlette says `Vary: Origin` on every response, with an Origin header or without)
        if "Vary" in headers:
            headers["Vary"] = ", ".join([*headers.getall("Vary"), "Origin"])
        else:
            headers["Vary"] = "Origin"


def parse_list(values: list[str] | None, default: list[str]) -> list[str]:
    """Space-separated values, or vLLM's JSON-list form in one value (`'["*"]'`), flattened.
    Raises ValueError for a value that starts like a JSON list but is not a list of strings."""
    out: list[str] = []
    for value in values or []:
        value = value.strip()
        if value.startswith("["):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {value!r} ({exc})") from None
            if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
                raise ValueError(f"not a JSON list of strings: {value!r}")
            out.extend(parsed)
        elif value:
            out.append(value)
    return out if values is not None else default


def policy(config: Any) -> CorsPolicy:
    return CorsPolicy.build(parse_list(getattr(config, "allowed_origins", None), []),
                            parse_list(getattr(config, "allowed_methods", None), ["*"]),
                            parse_list(getattr(config, "allowed_headers", None), ["*"]),
                            bool(getattr(config, "allow_credentials", False)))


def is_preflight(request: web.Request) -> bool:
    """An OPTIONS request with `Origin` and `Access-Control-Request-Method` (answered by
    `CorsPolicy.preflight` before auth and routing: `proxy.gate`)."""
    return "Origin" in request.headers and "Access-Control-Request-Method" in request.headers
