"""The Kubernetes probes: `GET /health/ready` and `GET /health/live`.

* readiness: 200 when the model is loaded (it is, once anything answers) and at least one engine
  is healthy: it answered `/health` at least once (the first probe asks every engine itself) and
  its circuit is not open (`proxy/engine/circuit.py`: failed health polls, refused connections
  and failing requests open it). Without `--engine-url` (render and derender only) the model alone
  makes it ready. 503 while draining, so the replica leaves the Service before it stops.
* liveness: 200 whenever the event loop runs a handler, draining included; a process whose loop is
  stuck, or that no longer accepts, fails it. Engines never make it fail (restarting the proxy
  does not mend an engine).

`HANDLERS` are answered before every other middleware (`access_log.middleware`): outside the API key (a kubelet has no
key), the drain's refusal and the access log (probes every few seconds are no traffic to count).
`GET /health` stays `vllm serve`'s (proxy/routes/basic.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from proxy.engine.pool import POOL
from proxy.http import json_response
from proxy.lifecycle import is_draining

READY_PATH = "/health/ready"
LIVE_PATH = "/health/live"


class _Readiness:
    """The served model's name, and whether some engine has ever answered `/health` (from then on,
    the circuits tell)."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.confirmed = False
        self.lock = asyncio.Lock()  # one round of engine checks at a time, however many probes come


READINESS: web.AppKey[_Readiness] = web.AppKey("readiness", _Readiness)


async def ready(request: web.Request) -> web.Response:
    app = request.app
    readiness = app[READINESS]
    if is_draining(app):
        return _not_ready("draining")
    pool = app.get(POOL)
    engines = pool.engines if pool is not None else []
    healthy = 0
    if engines:
        if not readiness.confirmed:
            async with readiness.lock:
                if not readiness.confirmed:
                    answers = await asyncio.gather(*(engine.check_health() for engine in engines))
                    readiness.confirmed = any(answers)
        healthy = sum(engine.healthy for engine in engines) if readiness.confirmed else 0
        if not healthy:
            return _not_ready("no healthy engine", total=len(engines))
    return json_response({"status": "ready", "model": readiness.model_name,
                          "engines": {"healthy": healthy, "total": len(engines)}})


def _not_ready(reason: str, total: int = 0) -> web.Response:
    return json_response({"status": "not ready", "reason": reason, "engines": {"healthy": 0, "total": total}},
                         status=503)


async def live(request: web.Request) -> web.Response:
    return web.Response(status=200, text="OK")


# answered before the access log, the drain and the keys (access_log.middleware(answered_first=))
HANDLERS = frozenset({ready, live})


def install(app: web.Application, model_name: str) -> None:
    """Add the probe routes (`HANDLERS` are answered first by the access-log middleware)."""
    app[READINESS] = _Readiness(model_name)
    app.router.add_get(READY_PATH, ready)
    app.router.add_get(LIVE_PATH, live)
