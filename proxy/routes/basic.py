"""/health, /v1/models (and one model: `GET /v1/models/{model}`), /version.

`GET /health` is `vllm serve`'s: 200 while the server runs, 503 while it drains on SIGTERM. The
Kubernetes probes (`/health/ready`, `/health/live`) are in `proxy/probes.py`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from aiohttp import web

from core.errors import model_not_found
from proxy.app import STATE
from proxy.http import json_response

VERSION = "0.1.0"
_CREATED = int(time.time())


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


def setup(app: web.Application) -> None:
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/models/{model:.+}", one_model)
    app.router.add_get("/version", version)
