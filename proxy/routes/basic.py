"""/health, /v1/models and /version."""

from __future__ import annotations

import time

from aiohttp import web

from proxy.app import STATE
from proxy.http import json_response

VERSION = "0.1.0"
_CREATED = int(time.time())


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    model = state.model
    data = [{
        "id": name, "object": "model", "created": _CREATED, "owned_by": "vllm", "root": model.name,
        "parent": None, "max_model_len": model.max_model_len, "permission": [],
    } for name in model.served_model_names]
    return json_response({"object": "list", "data": data})


async def version(request: web.Request) -> web.Response:
    return json_response({"version": VERSION})


def setup(app: web.Application) -> None:
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", version)
