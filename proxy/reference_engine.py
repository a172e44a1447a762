"""`derender-proxy reference-engine`: a CPU stand-in for `vllm serve MODEL --tokens-only`.

It speaks the tokens-only protocol (docs/vllm-wire-spec.md §2.3) byte-for-byte where clients can tell: the same
request validation and 400 messages, `data: {...}\\n\\n` SSE with one choice per event, interleaved
n>1, the usage-only last event, EOS inside `token_ids` with `stop_reason` = the EOS id, aborts
through `/inference/v1/abort_requests` and the legacy `/abort_requests`. Replies are canned
assistant turns (see `core.reference_engine`), paced by `--token-delay-ms`.

Tests, benchmarks and the demo run on it, so it also has fault knobs (`--fail-status`,
`--drop-after`, `--stall-after`, changeable at run time through `POST /debug/faults`) and it
records what it saw: `GET /debug/aborted` (every abort, by endpoint or client disconnect) and
`GET /debug/requests` (the last generate bodies, e.g. to check that no `stop` reached it).
`GET /debug/first-tokens` hands over (and forgets) each streamed request's id, arrival and first
token written, on `time.perf_counter()`'s clock (CLOCK_MONOTONIC on Linux: the same in every process
of the machine), so a benchmark can take the engine's own time to first token out of a client's.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from core.errors import RequestError
from core.model import ModelInfo
from core.reference_engine import (
    GenerateRequestIn, Generation, ReplyBook, check_request, engine_request_id, missing_request_ids,
    new_generation, parse_replies,
)
from proxy.http import error_middleware, json_response, read_json_object, validate

log = logging.getLogger("derender_proxy.reference_engine")

SSE_DONE = b"data: [DONE]\n\n"


@dataclass
class Faults:
    """Injected failures; 0 / None means off."""

    fail_status: int = 0  # every generate answers this status with an error body
    drop_after: int | None = None  # cut the connection after this many token events
    stall_after: int | None = None  # stop sending (keep the connection) after this many token events


@dataclass
class ReferenceEngine:
    model: ModelInfo
    replies: ReplyBook
    token_delay: float = 0.0  # seconds per engine step
    api_key: str | None = None
    faults: Faults = field(default_factory=Faults)
    aborted: list[dict[str, Any]] = field(default_factory=list)
    received: collections.deque = field(default_factory=lambda: collections.deque(maxlen=256))
    live: dict[str, asyncio.Event] = field(default_factory=dict)
    generate_calls: int = 0
    # (request id, arrival, first token written), perf_counter seconds; bounded, drained when read
    first_tokens: collections.deque = field(default_factory=lambda: collections.deque(maxlen=65536))

    def record_abort(self, request_id: str, via: str) -> None:
        self.aborted.append({"request_id": request_id, "via": via, "time": time.monotonic()})

    def aborted_ids(self) -> set[str]:
        return {a["request_id"] for a in self.aborted}


REFERENCE: web.AppKey[ReferenceEngine] = web.AppKey("reference_engine", ReferenceEngine)


def _check_key(request: web.Request, engine: ReferenceEngine) -> None:
    if engine.api_key and request.headers.get("Authorization") != f"Bearer {engine.api_key}":
        raise RequestError("Unauthorized", 401, "Unauthorized")


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(event) + b"\n\n"


async def generate(request: web.Request) -> web.StreamResponse:
    arrived = time.perf_counter()
    engine = request.app[REFERENCE]
    _check_key(request, engine)
    data = await read_json_object(request)
    engine.received.append(data)
    engine.generate_calls += 1
    req = validate(GenerateRequestIn, data)
    sampling = check_request(req, engine.model)
    if engine.faults.fail_status:
        status = engine.faults.fail_status
        raise RequestError(f"reference engine: injected failure (status {status})", status,
                           "BadRequestError" if status < 500 else "InternalServerError")
    rid = engine_request_id(req.request_id, request.headers.get("X-Request-Id"), secrets.token_hex(8))
    gen = new_generation(req, sampling, engine.replies, engine.model, rid, int(time.time()))
    abort = asyncio.Event()
    engine.live[rid] = abort
    try:
        if req.stream:
            return await _stream(request, engine, gen, abort, arrived)
        return await _full(engine, gen, abort)
    finally:
        engine.live.pop(rid, None)


async def _full(engine: ReferenceEngine, gen: Generation, abort: asyncio.Event) -> web.Response:
    steps = max(len(p.token_ids) for p in gen.plans)
    started = time.monotonic()
    try:
        if engine.faults.stall_after is not None:
            await abort.wait()
        elif engine.token_delay > 0:
            try:
                await asyncio.wait_for(abort.wait(), engine.token_delay * steps)
            except TimeoutError:
                pass
    except asyncio.CancelledError:  # the client went away: vLLM aborts the engine request
        engine.record_abort(gen.request_id, "disconnect")
        raise
    if abort.is_set():  # the tokens generated until the abort, as vLLM returns them
        done = int((time.monotonic() - started) / engine.token_delay) if engine.token_delay > 0 else 0
        if engine.faults.stall_after is not None:
            done = min(done, engine.faults.stall_after)
        for plan in gen.plans:
            plan.sent = min(done, len(plan.token_ids))
            plan.done = plan.sent >= len(plan.token_ids)
    return json_response(gen.response(aborted=abort.is_set()))


async def _stream(request: web.Request, engine: ReferenceEngine, gen: Generation,
                  abort: asyncio.Event, arrived: float) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(request)
    faults, delay = engine.faults, engine.token_delay
    sent = 0
    try:
        for events in gen.steps():
            if delay > 0:
                await asyncio.sleep(delay)
            if faults.stall_after is not None and sent >= faults.stall_after:
                await abort.wait()
            if abort.is_set():
                events = gen.abort_events()
                await resp.write(b"".join(_sse(e) for e in events))
                break
            for event in events:
                if faults.drop_after is not None and sent >= faults.drop_after:
                    request.transport.close()  # type: ignore[union-attr]  # mid-stream cut, no [DONE]
                    return resp
                await resp.write(_sse(event))
                if not sent:
                    engine.first_tokens.append((gen.request_id, arrived, time.perf_counter()))
                sent += 1
        tail = _sse(gen.usage_event()) + SSE_DONE if gen.include_usage else SSE_DONE
        await resp.write(tail)
        await resp.write_eof()
    except (asyncio.CancelledError, ConnectionResetError):
        if any(not p.done for p in gen.plans):
            engine.record_abort(gen.request_id, "disconnect")
        raise
    return resp


async def abort_requests(request: web.Request) -> web.Response:
    engine = request.app[REFERENCE]
    if request.path.startswith("/inference"):
        _check_key(request, engine)  # the legacy /abort_requests is unauthenticated, as in vLLM
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"JSON decode error: {exc}", 400, "BadRequestError") from None
    ids = body.get("request_ids") if isinstance(body, dict) else None
    if ids is None:
        raise missing_request_ids()
    for rid in ids if isinstance(ids, list) else [ids]:
        engine.record_abort(str(rid), "abort_requests")
        event = engine.live.get(str(rid))
        if event is not None:
            event.set()
    return web.Response(status=200)


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def models(request: web.Request) -> web.Response:
    model = request.app[REFERENCE].model
    return json_response({"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "vllm", "root": model.name,
         "parent": None, "max_model_len": model.max_model_len, "permission": []}
        for name in model.served_model_names]})


async def debug_aborted(request: web.Request) -> web.Response:
    return json_response(request.app[REFERENCE].aborted)


async def debug_requests(request: web.Request) -> web.Response:
    return json_response(list(request.app[REFERENCE].received))


async def debug_first_tokens(request: web.Request) -> web.Response:
    first_tokens = request.app[REFERENCE].first_tokens
    taken = [first_tokens.popleft() for _ in range(len(first_tokens))]
    return json_response([{"request_id": rid, "arrived": arrived, "first_token": first} for rid, arrived, first in taken])


async def debug_faults(request: web.Request) -> web.Response:
    engine = request.app[REFERENCE]
    if request.method == "POST":
        data = await read_json_object(request)
        for key, value in data.items():
            if key not in Faults.__dataclass_fields__:
                raise RequestError(f"unknown fault {key!r}", 400)
            setattr(engine.faults, key, value)
    return json_response(asdict(engine.faults))


def create_reference_app(model: ModelInfo, *, replies: ReplyBook | None = None, token_delay_ms: float = 0.0,
                         api_key: str | None = None, faults: Faults | None = None) -> web.Application:
    app = web.Application(middlewares=[error_middleware], client_max_size=64 * 1024 * 1024)
    app[REFERENCE] = ReferenceEngine(model=model, replies=replies or ReplyBook(model),
                                     token_delay=token_delay_ms / 1000.0, api_key=api_key,
                                     faults=faults or Faults())
    app.router.add_post("/inference/v1/generate", generate)
    app.router.add_post("/inference/v1/abort_requests", abort_requests)
    app.router.add_post("/abort_requests", abort_requests)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/debug/aborted", debug_aborted)
    app.router.add_get("/debug/requests", debug_requests)
    app.router.add_get("/debug/first-tokens", debug_first_tokens)
    app.router.add_route("*", "/debug/faults", debug_faults)
    return app


# -- command line ---------------------------------------------------------------------------------

def add_reference_engine_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default=None,
                        help="model directory or cached HF repo id (default: the embedded Qwen3)")
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--served-model-name", nargs="+", default=[])
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--replies", default=None,
                        help="file of assistant turns: a JSON list, or JSON lines; each a string or "
                             "{\"text\": ..., \"when\": substring-of-prompt}")
    parser.add_argument("--token-delay-ms", type=float, default=0.0, help="delay per engine step")
    parser.add_argument("--api-key", default=None, help="required Bearer token under /inference")
    parser.add_argument("--fail-status", type=int, default=0, help="answer every generate with this status")
    parser.add_argument("--drop-after", type=int, default=None, help="cut streams after N token events")
    parser.add_argument("--stall-after", type=int, default=None, help="stall streams after N token events")
    parser.add_argument("--log-level", default="info")


def cmd_reference_engine(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no PyTorch banner: we only need tokenizers
    from proxy.config import ServerConfig
    from proxy.model_loader import load_served_model

    logging.basicConfig(level=args.log_level.upper(), format="%(message)s")
    model = load_served_model(ServerConfig(model=args.model, tokenizer=args.tokenizer,
                                           served_model_name=args.served_model_name,
                                           max_model_len=args.max_model_len))
    replies = None
    if args.replies:
        replies = ReplyBook(model, parse_replies(Path(args.replies).read_text(encoding="utf-8")))
    app = create_reference_app(model, replies=replies, token_delay_ms=args.token_delay_ms, api_key=args.api_key,
                               faults=Faults(args.fail_status, args.drop_after, args.stall_after))
    print(f"reference engine for {model.name} on http://{args.host}:{args.port}", flush=True)
    from proxy.serving import new_event_loop  # uvloop when installed, like `serve`

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    web.run_app(app, host=args.host, port=args.port, access_log=None, handler_cancellation=True,
                print=None, loop=loop)
    return 0
