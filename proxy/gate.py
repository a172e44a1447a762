"""The per-request checks between the access log and the error handler, as one middleware.

In order, as three middlewares did it before (each one frame on every request's path):
1. a CORS preflight is answered (`proxy.cors`: before the drain, keys and routing);
2. the trace context: a span with `--otlp-traces-endpoint`, else a client's `traceparent`
   carried to the engines (`proxy.tracing`), entered only when there is something to trace;
3. the drain: 503 while shutting down, else the request counts as in flight (`proxy.lifecycle`).
"""

from __future__ import annotations

import functools
from typing import Any

from aiohttp import web

from proxy import cors, lifecycle, tracing


def middleware(config: Any) -> Any:
    policy = cors.policy(config)

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "OPTIONS" and cors.is_preflight(request):
            return policy.preflight(request)
        if tracing.wanted(request):
            return await tracing.middleware(request, functools.partial(lifecycle.admit, handler=handler))
        return await lifecycle.admit(request, handler)

    return gate
