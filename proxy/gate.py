"""The per-request checks between the access log and the routes, as one middleware.

In order:
1. a CORS preflight is answered (`proxy.cors`: before the drain, keys and routing);
2. the trace context: a span with `--otlp-traces-endpoint`, else a client's `traceparent`
   carried to the engines (`proxy.tracing`), entered only when there is something to trace;
3. the drain: 503 while shutting down, else the request counts as in flight (`proxy.lifecycle`);
4. every failure below (keys, routing, handlers) becomes an OpenAI error body (`proxy.http`).
`install` adds the one response hook (the request id and CORS headers).

One middleware rather than four: each layer is a partial and a coroutine frame on every
request's path, which the raw derender endpoints (one small call per token) pay per token.
"""

from __future__ import annotations

import functools
from typing import Any

from aiohttp import web

from proxy import access_log, cors, lifecycle, tracing
from proxy.http import answer, error_response


def middleware(config: Any) -> Any:
    policy = cors.policy(config)

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "OPTIONS" and cors.is_preflight(request):
            return policy.preflight(request)
        if tracing.wanted(request):
            return await tracing.middleware(request, functools.partial(admitted, handler=handler))
        return await admitted(request, handler)

    return gate


def install(app: web.Application, config: Any) -> None:
    """One hook on every response being prepared (streams included): its `X-Request-Id`, and
    Starlette's CORS headers for a request with `Origin` (`Vary: Origin` on all)."""
    policy = cors.policy(config)

    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        access_log.echo_request_id(request, response)
        policy.decorate(request, response)

    app.on_response_prepare.append(on_prepare)


async def admitted(request: web.Request, handler: Any) -> web.StreamResponse:
    """The drain, then the handler with whatever it raises answered in the OpenAI error shape."""
    state = request.app[lifecycle.LIFECYCLE]
    if state.draining:
        return lifecycle.refusal()
    state.enter()
    try:
        return await handler(request)
    except Exception as exc:
        return await answer(request, exc, error_response)
    finally:
        state.leave()
