"""Several engines behind one proxy: choice, health, retry, prefix affinity.

* **Choice:** the healthy engine with the fewest outstanding requests (ties: the first listed).
  With `--prefix-affinity-tokens N`, requests sharing their first N prompt tokens go to the same
  engine (rendezvous hashing, so losing one engine only moves its own prefixes), which keeps the
  engine's prefix cache warm; when that engine is down the least-loaded one is used.
* **Health:** `/health` is polled every `--health-check-interval` seconds. An engine that refuses
  a connection is marked down at once and comes back when a poll succeeds. When every engine is
  down, requests still try them (one may have just restarted) rather than fail without trying.
* **Retry:** a request that fails before its first token (connection refused, 5xx, timeout) is
  retried once on another engine (on the same one only when it is alone and merely dropped a
  kept-alive connection). After the first token nothing is retried: the client already has part
  of an answer.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from array import array
from collections.abc import Sequence
from typing import Any

import aiohttp
from aiohttp import web

from core.errors import RequestError
from proxy.engine.client import ENGINE_ID_PREFIX, Engine, EngineError, EngineStream, EngineTimeouts

log = logging.getLogger("derender_proxy.engine")

NO_ENGINE_MESSAGE = "No inference engine is configured (--engine-url)."


class EnginePool:
    def __init__(self, urls: Sequence[str], session: aiohttp.ClientSession | None = None, *,
                 api_key: str | None = None, timeouts: EngineTimeouts = EngineTimeouts(),
                 affinity_tokens: int = 0, metrics: Any = None) -> None:
        self.session = session
        self.engines = [Engine(url, session, api_key=api_key, timeouts=timeouts) for url in urls]
        self.affinity_tokens = affinity_tokens
        self.metrics = metrics
        self._health_task: asyncio.Task | None = None

    def attach(self, session: aiohttp.ClientSession) -> None:
        """Use this session (created on the running loop, at app start-up) for every engine."""
        self.session = session
        for engine in self.engines:
            engine.session = session

    # -- choice ---------------------------------------------------------------------------------

    def choose(self, prompt_ids: Sequence[int] | None = None, exclude: Sequence[Engine] = ()) -> Engine | None:
        candidates = [e for e in self.engines if e not in exclude]
        if not candidates:
            return None
        healthy = [e for e in candidates if e.healthy] or candidates
        if self.affinity_tokens > 0 and prompt_ids and len(healthy) > 1:
            key = array("q", prompt_ids[:self.affinity_tokens]).tobytes()
            return max(healthy, key=lambda e: zlib.crc32(e.url.encode(), zlib.crc32(key)))
        return min(healthy, key=lambda e: e.outstanding)

    def mark_down(self, engine: Engine, why: str) -> None:
        if engine.healthy:
            log.warning("engine %s marked down: %s", engine.url, why)
        engine.healthy = False

    # -- requests with retry ----------------------------------------------------------------------

    def _note_failure(self, engine: Engine, exc: EngineError) -> None:
        if self.metrics is not None:
            self.metrics.engine_error(engine.url, exc.kind)
        if exc.kind == "connect":
            self.mark_down(engine, exc.message)

    def _next_engine(self, prompt_ids: Sequence[int] | None, tried: list[Engine], last: EngineError | None
                     ) -> Engine:
        engine = self.choose(prompt_ids, exclude=tried)
        if engine is None and last is not None and last.kind == "disconnect" and len(tried) == 1:
            engine = tried[0]  # a lone engine that dropped a stale connection: try it once more
        if engine is None:
            if last is not None:
                raise last
            raise EngineError(NO_ENGINE_MESSAGE, 503, "ServiceUnavailableError", kind="connect")
        if tried and self.metrics is not None:
            self.metrics.engine_retry(tried[-1].url)
        return engine

    async def open_stream(self, request: dict[str, Any], prompt_ids: Sequence[int] | None = None
                          ) -> tuple[EngineStream, dict[str, Any] | None]:
        """Start a stream and read its first event, retrying once elsewhere on an early failure.

        Returns the stream and its first event (None for a stream that ended at once)."""
        tried: list[Engine] = []
        last: EngineError | None = None
        for _ in range(2):
            engine = self._next_engine(prompt_ids, tried, last)
            tried.append(engine)
            engine.outstanding += 1
            stream: EngineStream | None = None
            try:
                stream = await engine.open_stream(request)
                stream.on_close(lambda e=engine: _release(e))
                first = await stream.next()
                return stream, first
            except EngineError as exc:
                if stream is None:
                    engine.outstanding -= 1
                else:
                    stream.abort()  # releases via on_close
                self._note_failure(engine, exc)
                last = exc
                if not exc.retryable:
                    raise
            except BaseException:  # cancelled (the client went away) while waiting for the engine
                if stream is None:
                    engine.outstanding -= 1
                    if request.get("request_id"):
                        engine.abort_in_background([ENGINE_ID_PREFIX + request["request_id"]])
                else:
                    stream.abort()
                raise
        assert last is not None
        raise last

    async def generate(self, request: dict[str, Any], prompt_ids: Sequence[int] | None = None
                       ) -> tuple[Engine, dict[str, Any]]:
        """Non-streaming generate with the same single retry; returns the engine that answered."""
        tried: list[Engine] = []
        last: EngineError | None = None
        for _ in range(2):
            engine = self._next_engine(prompt_ids, tried, last)
            tried.append(engine)
            engine.outstanding += 1
            try:
                return engine, await engine.generate(request)
            except EngineError as exc:
                self._note_failure(engine, exc)
                last = exc
                if not exc.retryable:
                    raise
            finally:
                engine.outstanding -= 1
        assert last is not None
        raise last

    # -- health ----------------------------------------------------------------------------------

    async def check_all(self) -> None:
        results = await asyncio.gather(*(e.check_health() for e in self.engines))
        for engine, ok in zip(self.engines, results):
            if ok and not engine.healthy:
                log.info("engine %s is back", engine.url)
            if not ok:
                self.mark_down(engine, "health check failed")
            engine.healthy = ok

    async def _health_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check_all()
            except Exception:  # never let the loop die
                log.exception("engine health check failed")

    def start_health_checks(self, interval: float) -> None:
        if interval > 0 and self._health_task is None:
            self._health_task = asyncio.get_running_loop().create_task(self._health_loop(interval))

    async def close(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            try:
                await self._health_task
            except asyncio.CancelledError:
                pass
            self._health_task = None


def _release(engine: Engine) -> None:
    engine.outstanding -= 1


# -- app wiring ----------------------------------------------------------------------------------

POOL: web.AppKey[EnginePool] = web.AppKey("engine_pool", EnginePool)


def install(app: web.Application) -> None:
    """Create the pool now; open the shared session and start health checks at start-up."""
    from proxy.app import STATE
    from proxy.metrics import METRICS

    config = app[STATE].config
    pool = EnginePool(config.engine_url, api_key=config.engine_api_key,
                      timeouts=EngineTimeouts(config.engine_connect_timeout, config.engine_first_token_timeout,
                                              config.engine_idle_timeout),
                      affinity_tokens=config.prefix_affinity_tokens, metrics=app.get(METRICS))
    app[POOL] = pool

    async def start(app: web.Application) -> None:
        # idle connections are dropped after 4 s, before vLLM's uvicorn closes them (its default
        # keep-alive is 5 s), so a request rarely lands on a connection the engine is closing
        connector = aiohttp.TCPConnector(limit=config.engine_max_connections, limit_per_host=0,
                                         ttl_dns_cache=300, keepalive_timeout=4.0)
        pool.attach(aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                          timeout=aiohttp.ClientTimeout(total=None)))
        pool.start_health_checks(config.health_check_interval)

    async def stop(app: web.Application) -> None:
        await pool.close()
        if pool.session is not None:
            await pool.session.close()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)


def pool_of(app: web.Application) -> EnginePool:
    pool = app.get(POOL)
    if pool is None or not pool.engines:
        raise RequestError(NO_ENGINE_MESSAGE, 503, "ServiceUnavailableError")
    return pool
