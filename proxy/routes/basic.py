"""/health, the Kubernetes probes, /v1/models (and one model), /version.

* `GET /health`: as `vllm serve`'s, 200 while the server runs; 503 while it drains on SIGTERM.
* `GET /health/ready` (readiness): 200 when the model is loaded (it is, once anything answers) and
  at least one engine is healthy: it answered `/health` at least once (the first probe asks every
  engine itself) and its circuit is not open (`proxy/engine/circuit.py`: failed health polls,
  refused connections and failing requests open it). Without `--engine-url` (render and derender
  only) the model alone makes it ready. 503 while draining, so the replica leaves the Service.
* `GET /health/live` (liveness): 200 whenever the event loop runs a handler, draining included; a
  process whose loop is stuck, or that no longer accepts, fails it. Engines never make it fail
  (restarting the proxy does not mend an engine).

The two probes are answered by `probe_middleware`, outside the API key, the drain's refusal and
the access log: a kubelet has no key, and probes every few seconds are no traffic to count.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from aiohttp import web

from core.errors import model_not_found
from proxy.app import STATE
from proxy.engine.pool import POOL
from proxy.http import json_response
from proxy.lifecycle import is_draining

VERSION = "0.1.0"
_CREATED = int(time.time())
READY_PATH = "/health/ready"
LIVE_PATH = "/health/live"


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


def _card(name: str, root: str, max_model_len: int) -> dict[str, Any]:
    """A model as vLLM's ModelCard writes it (permission included)."""
    return {
        "id": name, "object": "model", "created": _CREATED, "owned_by": "vllm", "root": root, "parent": None,
        "max_model_len": max_model_len,
        "permission": [{
            "id": f"modelperm-{secrets.token_hex(8)}", "object": "model_permission", "created": _CREATED,
            "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
            "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False, "organization": "*",
            "group": None, "is_blocking": False}],
    }


async def models(request: web.Request) -> web.Response:
    model = request.app[STATE].model
    data = [_card(name, model.name, model.max_model_len) for name in model.served_model_names]
    return json_response({"object": "list", "data": data})


async def one_model(request: web.Request) -> web.Response:
    """`GET /v1/models/{model}` (the SDKs' `models.retrieve`): a served name may hold slashes, sent
    as they are or as `%2F` (the openai client's encoding)."""
    model = request.app[STATE].model
    name = request.match_info["model"]
    if name not in model.served_model_names:
        raise model_not_found(name, model.served_model_names)
    return json_response(_card(name, model.name, model.max_model_len))


async def version(request: web.Request) -> web.Response:
    return json_response({"version": VERSION})


# -- probes ---------------------------------------------------------------------------------------

class _Readiness:
    """Whether some engine has ever answered `/health` (from then on, the circuits tell)."""

    def __init__(self) -> None:
        self.confirmed = False
        self.lock = asyncio.Lock()  # one round of engine checks at a time, however many probes come


READINESS: web.AppKey[_Readiness] = web.AppKey("readiness", _Readiness)


async def ready(request: web.Request) -> web.Response:
    app = request.app
    state = app[STATE]
    if is_draining(app):
        return _not_ready("draining")
    pool = app.get(POOL)
    engines = pool.engines if pool is not None else []
    if engines:
        readiness = app[READINESS]
        if not readiness.confirmed:
            async with readiness.lock:
                if not readiness.confirmed:
                    answers = await asyncio.gather(*(engine.check_health() for engine in engines))
                    readiness.confirmed = any(answers)
        healthy = sum(engine.healthy for engine in engines) if readiness.confirmed else 0
        if not healthy:
            return _not_ready("no healthy engine", total=len(engines))
        return json_response({"status": "ready", "model": state.model.name,
                              "engines": {"healthy": healthy, "total": len(engines)}})
    return json_response({"status": "ready", "model": state.model.name, "engines": {"healthy": 0, "total": 0}})


def _not_ready(reason: str, total: int = 0) -> web.Response:
    return json_response({"status": "not ready", "reason": reason, "engines": {"healthy": 0, "total": total}},
                         status=503)


async def live(request: web.Request) -> web.Response:
    return web.Response(status=200, text="OK")


_PROBES = frozenset({ready, live})


@web.middleware
async def probe_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Answer the probes before every other middleware (see the module docstring)."""
    route_handler = request.match_info.handler
    if route_handler in _PROBES:
        return await route_handler(request)
    return await handler(request)


def setup(app: web.Application) -> None:
    app[READINESS] = _Readiness()
    app.router.add_get("/health", health)
    app.router.add_get(READY_PATH, ready)
    app.router.add_get(LIVE_PATH, live)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/models/{model:.+}", one_model)
    app.router.add_get("/version", version)
