"""Several engines behind one proxy: choice, limits, health, circuit breaking, retry, affinity.

* **Choice:** among the engines that may take a request now, the one with the fewest outstanding
  requests (ties: the first listed). With `--prefix-affinity-tokens N`, requests sharing their
  first N prompt tokens go to the same engine (rendezvous hashing, so losing one engine only moves
  its own prefixes), which keeps the engine's prefix cache warm; when that engine is open or full,
  the next engine in the prefix's rendezvous order takes it (better a cold cache than a queue).
* **Concurrency limit:** with `--engine-max-concurrency N`, an engine never has more than N
  requests outstanding. Requests beyond that wait in one FIFO queue for a slot on any engine
  (a retry goes to the head: it has waited already), at most `--engine-queue-timeout` seconds,
  then get a 503; with `--engine-max-queue M`, a request that finds M others waiting gets its
  503 at once (each waiting request holds its rendered prompt: a flood must not grow the queue
  without end); a client that goes away while queued leaves the queue and no engine ever sees
  its request. Without a limit (0, the default) requests never queue for capacity. The engine
  requests of one client request that must all start together (the prompts of a multi-prompt
  completion: `group=`) are admitted together, or they could hold slots waiting for each other.
* **Circuit breaker** (`proxy.engine.circuit`, one per engine): `--engine-failure-threshold`
  consecutive failures (connect errors, timeouts, 5xx, broken streams; never a 4xx, which is the
  client's request) open it for `--engine-cooldown` seconds; then one probe request is let
  through and its first token closes it. A refused connection or a failed `/health` poll opens it
  at once, and a successful poll closes such an engine again (the "marked down" of old).
* **Nothing available:** when every engine is open, requests fail fast with a 503 saying so and
  when to retry, instead of piling onto engines known to be failing.
* **Retry:** a request that fails before its first token (connection refused, 5xx, timeout) is
  retried once on another engine (on the same one only when it is alone and merely dropped a
  kept-alive connection). After the first token nothing is retried: the client already has part
  of an answer.
"""

from __future__ import annotations

import asyncio
import logging
import math
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from core.errors import RequestError
from proxy.engine.circuit import OPEN, UNREACHABLE, Circuit
from proxy.engine.client import ENGINE_ID_PREFIX, Engine, EngineError, EngineStream, EngineTimeouts
from proxy.engine.connections import HTTPClient

log = logging.getLogger("derender_proxy.engine")

NO_ENGINE_MESSAGE = "No inference engine is configured (--engine-url)."
BUSY_RETRY_AFTER = 1  # seconds: a slot usually frees within a generation or two


def counts_against_engine(exc: EngineError) -> bool:
    """Does this failure say the engine is in trouble (circuit breaker)? A 4xx never does: it is
    the client's request (too long, bad parameters), and one client must not shut an engine off."""
    if exc.kind in ("connect", "disconnect", "timeout"):
        return True
    if exc.kind in ("status", "stream"):
        return exc.status >= 500  # error events carry the engine's code; ours are 502
    return False  # unavailable / busy: raised by the pool itself


@dataclass(eq=False)
class _Slot:
    """One request's place on an engine, held until the request is over."""

    engine: Engine
    probe: bool  # the half-open circuit's one probe
    group: Hashable | None  # the request's siblings (prompts of one completion), if any


@dataclass(eq=False)
class _Waiter:
    """A request waiting for a slot; its future gets the `_Slot` or an EngineError."""

    prompt_ids: Sequence[int] | None
    exclude: Sequence[Engine]
    group: Hashable | None
    future: asyncio.Future = field(repr=False)
    prefer: Engine | None = None


class EnginePool:
    def __init__(self, urls: Sequence[str], http: HTTPClient | None = None, *,
                 api_key: str | None = None, timeouts: EngineTimeouts = EngineTimeouts(),
                 affinity_tokens: int = 0, metrics: Any = None, max_concurrency: int = 0,
                 queue_timeout: float = 30.0, failure_threshold: int = 5, cooldown: float = 10.0,
                 max_queue: int = 0) -> None:
        self.http = http
        self.engines = [Engine(url, http, api_key=api_key, timeouts=timeouts,
                               circuit=Circuit(failure_threshold, cooldown)) for url in urls]
        self.affinity_tokens = affinity_tokens
        self.metrics = metrics
        self.max_concurrency = max_concurrency  # per engine; 0: unlimited
        self.queue_timeout = queue_timeout  # 0: no queue, answer 503 at once when every engine is full
        self.max_queue = max_queue  # 0: no bound on the queue's length (its timeout bounds it)
        self._waiters: deque[_Waiter] = deque()
        self._groups: dict[Hashable, int] = {}  # slots held per sibling group
        self._timers: dict[Engine, asyncio.TimerHandle] = {}
        self._health_task: asyncio.Task | None = None
        for engine in self.engines:
            self._publish(engine)

    def attach(self, http: HTTPClient) -> None:
        """Use this client (created on the running loop, at app start-up) for every engine."""
        self.http = http
        for engine in self.engines:
            engine.http = http

    @property
    def queue_length(self) -> int:
        return len(self._waiters)

    # -- choice ---------------------------------------------------------------------------------

    def _has_slot(self, engine: Engine) -> bool:
        return self.max_concurrency <= 0 or engine.outstanding < self.max_concurrency

    def choose(self, prompt_ids: Sequence[int] | None = None, exclude: Sequence[Engine] = (), *,
               ignore_limit: bool = False, prefer: Engine | None = None) -> Engine | None:
        """The engine a request would go to now, or None (every candidate open, probing or full).
        `prefer` wins whenever it is a candidate (the engine whose prefix cache holds the prompt)."""
        candidates = [e for e in self.engines
                      if e not in exclude and e.circuit.allows() and (ignore_limit or self._has_slot(e))]
        if not candidates:
            return None
        if prefer is not None and prefer in candidates:
            return prefer
        if self.affinity_tokens > 0 and prompt_ids and len(self.engines) > 1:
            key = array("q", prompt_ids[:self.affinity_tokens]).tobytes()
            return max(candidates, key=lambda e: zlib.crc32(e.url.encode(), zlib.crc32(key)))
        return min(candidates, key=lambda e: e.outstanding)

    def _usable(self, exclude: Sequence[Engine] = ()) -> bool:
        """Is some engine (not excluded) closed or half-open, so waiting for it makes sense?"""
        return any(e.circuit.usable() for e in self.engines if e not in exclude)

    def mark_down(self, engine: Engine, why: str) -> None:
        """The engine is unreachable: open its circuit now (a good /health poll closes it)."""
        self._open(engine, UNREACHABLE, why)

    # -- slots and the queue ----------------------------------------------------------------------

    def _take(self, engine: Engine, group: Hashable | None) -> _Slot:
        engine.outstanding += 1
        slot = _Slot(engine, engine.circuit.take(), group)
        self._publish(engine)
        if group is not None:
            held = self._groups.get(group, 0)
            self._groups[group] = held + 1
            if held == 0 and self._waiters:
                self._admit_siblings(group)
        return slot

    def _admit_siblings(self, group: Hashable) -> None:
        """A group just got its first slot: its queued siblings come in too (see `open_stream`)."""
        for waiter in [w for w in self._waiters if w.group == group and not w.future.done()]:
            engine = self.choose(waiter.prompt_ids, waiter.exclude, ignore_limit=True, prefer=waiter.prefer)
            if engine is not None:
                self._waiters.remove(waiter)
                waiter.future.set_result(self._take(engine, group))

    def _release(self, slot: _Slot, error: EngineError | None = None, success: bool = False) -> None:
        """A request is over: free its slot, feed its outcome to the circuit breaker (an error, a
        success, or neither when we ended it ourselves) and serve the queue."""
        engine = slot.engine
        engine.outstanding -= 1
        if slot.group is not None:
            held = self._groups[slot.group] - 1
            if held:
                self._groups[slot.group] = held
            else:
                del self._groups[slot.group]
        circuit = engine.circuit
        if slot.probe:
            circuit.probe_over()
        if error is not None and counts_against_engine(error):
            if error.kind == "connect":
                self._open(engine, UNREACHABLE, error.message)
            elif circuit.failure():
                self._opened(engine, f"{error.message} ({error.kind})")
        elif success and circuit.success():
            log.info("engine %s is back (probe succeeded)", engine.url)
        self._publish(engine)
        self._dispatch()

    def _started(self, engine: Engine) -> None:
        """A request got its first token: a half-open engine has proved itself."""
        if engine.circuit.started():
            log.info("engine %s is back (probe started generating)", engine.url)
            self._publish(engine)
            self._dispatch()

    async def _acquire(self, prompt_ids: Sequence[int] | None, exclude: Sequence[Engine],
                       group: Hashable | None, retry: bool = False, prefer: Engine | None = None) -> _Slot:
        """A slot on an engine: now, or after queueing."""
        if group is not None and group in self._groups:  # a sibling is in: no waiting (see open_stream)
            engine = self.choose(prompt_ids, exclude, ignore_limit=True, prefer=prefer)
            if engine is not None:
                return self._take(engine, group)
        if not self._waiters:  # nobody ahead: no need to queue
            engine = self.choose(prompt_ids, exclude, prefer=prefer)
            if engine is not None:
                return self._take(engine, group)
        if not self._usable(exclude):
            raise self._unavailable(exclude)
        if self.queue_timeout <= 0 or (0 < self.max_queue <= len(self._waiters) and not retry):
            raise self._busy(None)  # (a retry has waited already: it goes to the head, over the bound)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(prompt_ids, tuple(exclude), group, loop.create_future(), prefer)
        if retry:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        self._dispatch()
        if waiter.future.done():
            return waiter.future.result()
        started = loop.time()
        self._publish_queue()
        try:
            async with asyncio.timeout(self.queue_timeout):
                return await waiter.future
        except TimeoutError:
            granted = _granted(waiter)
            if granted is not None:  # the slot came just as the time ran out: take it
                return granted
            raise self._busy(loop.time() - started) from None
        except asyncio.CancelledError:  # the client went away while queued: it never reaches an engine
            granted = _granted(waiter)
            if granted is not None:
                self._release(granted)
            raise
        finally:
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass
            if self.metrics is not None:
                self.metrics.observe_queue_wait(loop.time() - started)
            self._publish_queue()

    def _dispatch(self) -> None:
        """Hand free slots to the waiters, first come first served; when every engine is open, fail
        them all (nothing will free up before the cooldown)."""
        if not self._waiters:
            return
        if not self._usable():
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.future.done():
                    waiter.future.set_exception(self._unavailable())
            self._publish_queue()
            return
        skipped: list[_Waiter] = []  # waiters whose allowed engines are all busy (retries excluding some)
        while self._waiters and any(e.circuit.allows() and self._has_slot(e) for e in self.engines):
            waiter = self._waiters.popleft()
            if waiter.future.done():
                continue
            engine = self.choose(waiter.prompt_ids, waiter.exclude, prefer=waiter.prefer)
            if engine is not None:
                waiter.future.set_result(self._take(engine, waiter.group))
            elif not self._usable(waiter.exclude):
                waiter.future.set_exception(self._unavailable(waiter.exclude))
            else:
                skipped.append(waiter)
        self._waiters.extendleft(reversed(skipped))
        self._publish_queue()

    def _unavailable(self, exclude: Sequence[Engine] = ()) -> EngineError:
        reopen = min((e.circuit.open_until for e in self.engines if e not in exclude and e.circuit.state == OPEN),
                     default=0.0)  # the first engine to turn half-open
        wait = max(1, math.ceil(reopen - self.engines[0].circuit.clock())) if reopen else BUSY_RETRY_AFTER
        count = len(self.engines)
        which = "The inference engine is" if count == 1 else f"All {count} inference engines are"
        if self.metrics is not None:
            self.metrics.shed("unavailable")
        return EngineError(f"{which} unavailable (down or failing repeatedly); retry in {wait} s.", 503,
                           "ServiceUnavailableError", kind="unavailable", retry_after=wait)

    def _busy(self, waited: float | None) -> EngineError:
        if self.metrics is not None:
            self.metrics.shed("queue_timeout" if waited is not None else "queue_full")
        if waited is None and self.queue_timeout > 0:
            message = (f"All inference engines are at their concurrency limit and {len(self._waiters)} requests "
                       "are already waiting for them")
        elif self.max_concurrency > 0:
            message = f"All inference engines are at their concurrency limit ({self.max_concurrency} requests each)"
        else:  # unlimited, but the only usable engines are half-open with their probe in flight
            message = "No inference engine can take the request while failed engines are being probed"
        message += f"; no slot freed up within {waited:.1f} s." if waited is not None else "."
        return EngineError(message, 503, "ServiceUnavailableError", kind="busy", retry_after=BUSY_RETRY_AFTER)

    # -- circuit state changes ----------------------------------------------------------------------

    def _open(self, engine: Engine, reason: str, why: str) -> None:
        was_open = engine.circuit.state == OPEN
        engine.circuit.trip(reason)
        self._opened(engine, why, quiet=was_open)

    def _opened(self, engine: Engine, why: str, quiet: bool = False) -> None:
        """The engine's circuit has just opened (or its cooldown restarted)."""
        if not quiet:
            log.warning("engine %s taken out for %.1f s: %s", engine.url, engine.circuit.cooldown, why)
            if self.metrics is not None:
                self.metrics.engine_opened(engine.url)
        self._publish(engine)
        self._dispatch()  # waiters that only this engine could serve fail now
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        old = self._timers.pop(engine, None)
        if old is not None:
            old.cancel()
        # at the end of the cooldown the engine turns half-open: a waiter may probe it
        self._timers[engine] = loop.call_later(engine.circuit.cooldown + 0.001, self._cooldown_over, engine)

    def _cooldown_over(self, engine: Engine) -> None:
        self._timers.pop(engine, None)
        self._publish(engine)
        self._dispatch()

    def _publish(self, engine: Engine) -> None:
        if self.metrics is not None:
            self.metrics.engine_status(engine.url, engine.circuit.state, engine.outstanding)

    def _publish_queue(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_length(self.queue_length)

    # -- requests with retry ----------------------------------------------------------------------

    def _note_failure(self, engine: Engine, exc: EngineError) -> None:
        if self.metrics is not None:
            self.metrics.engine_error(engine.url, exc.kind)

    async def _next_engine(self, prompt_ids: Sequence[int] | None, tried: list[Engine], last: EngineError | None,
                           group: Hashable | None, prefer: Engine | None = None) -> _Slot:
        if not self.engines:
            raise EngineError(NO_ENGINE_MESSAGE, 503, "ServiceUnavailableError", kind="unavailable")
        if not tried or last is None:
            return await self._acquire(prompt_ids, (), group, prefer=prefer)
        exclude: Sequence[Engine] = tried
        if not self._usable(exclude) and last.kind == "disconnect" and len(tried) == 1:
            exclude = ()  # a lone engine that dropped a stale connection: try it once more
        if not self._usable(exclude):
            raise last
        if self.metrics is not None:
            self.metrics.engine_retry(tried[-1].url)
        return await self._acquire(prompt_ids, exclude, group, retry=True)

    async def open_stream(self, request: dict[str, Any], prompt_ids: Sequence[int] | None = None, *,
                          group: Hashable | None = None, prefer: Engine | None = None,
                          max_event_bytes: int | None = None, while_waiting: Callable[[], None] | None = None
                          ) -> tuple[EngineStream, dict[str, Any] | None]:
        """Start a stream and read its first event, retrying once elsewhere on an early failure.

        Returns the stream and its first event (None for a stream that ended at once). The slot
        is held until the stream is closed (end, failure or abort).

        `group`: the same value for the engine requests of one client request that are opened
        together and held until all have started (the prompts of a multi-prompt completion).
        Once one of them has a slot the others get one without waiting, beyond the limit if need
        be: otherwise they would hold slots while queueing for each other, and a request with
        more prompts than there are slots would never start.

        `prefer`: the engine to use if it can take the request now or first frees a slot (a
        retry goes elsewhere as usual). `max_event_bytes`: the most one event of this request may
        hold (`proxy.engine.sse.event_bytes_bound`). `while_waiting`: called once, as soon as an
        engine accepted the request, before its first event is awaited: the caller's own work that
        the engine request does not need (its time then overlaps the engine's time to first token);
        if it raises, the engine request is aborted."""
        tried: list[Engine] = []
        last: EngineError | None = None
        for _ in range(2):
            slot = await self._next_engine(prompt_ids, tried, last, group, prefer)
            engine = slot.engine
            tried.append(engine)
            try:
                stream = await engine.open_stream(request, max_event_bytes=max_event_bytes)
            except EngineError as exc:
                self._release(slot, error=exc)
                self._note_failure(engine, exc)
                last = exc
                if not exc.retryable:
                    raise
                continue
            except BaseException:  # cancelled (the client went away) while waiting for the engine
                self._release(slot)
                if request.get("request_id"):
                    engine.abort_in_background([ENGINE_ID_PREFIX + request["request_id"]])
                raise
            stream.on_close(lambda slot=slot, stream=stream: self._release(slot, stream.error, stream.completed))
            try:
                if while_waiting is not None:
                    hook, while_waiting = while_waiting, None  # once, even if a retry follows
                    hook()
                first = await stream.next()
            except EngineError as exc:  # the stream released its slot and recorded the failure on close
                stream.abort()
                self._note_failure(engine, exc)
                last = exc
                if not exc.retryable:
                    raise
                continue
            except BaseException:
                stream.abort()
                raise
            self._started(engine)
            return stream, first
        assert last is not None
        raise last

    async def generate(self, request: dict[str, Any], prompt_ids: Sequence[int] | None = None, *,
                       group: Hashable | None = None, max_answer_bytes: int | None = None
                       ) -> tuple[Engine, dict[str, Any]]:
        """Non-streaming generate with the same single retry; returns the engine that answered."""
        tried: list[Engine] = []
        last: EngineError | None = None
        for _ in range(2):
            slot = await self._next_engine(prompt_ids, tried, last, group)
            engine = slot.engine
            tried.append(engine)
            try:
                answer = await engine.generate(request, max_answer_bytes=max_answer_bytes)
            except EngineError as exc:
                self._release(slot, error=exc)
                self._note_failure(engine, exc)
                last = exc
                if not exc.retryable:
                    raise
                continue
            except BaseException:
                self._release(slot)
                raise
            self._release(slot, success=True)
            return engine, answer
        assert last is not None
        raise last

    # -- health ----------------------------------------------------------------------------------

    async def check_all(self) -> None:
        results = await asyncio.gather(*(e.check_health() for e in self.engines))
        for engine, ok in zip(self.engines, results):
            if not ok:
                self._open(engine, UNREACHABLE, "health check failed")
            elif engine.circuit.reachable():
                log.info("engine %s is back (health check)", engine.url)
                self._publish(engine)
                self._dispatch()

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
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._health_task is not None:
            self._health_task.cancel()
            try:
                await self._health_task
            except asyncio.CancelledError:
                pass
            self._health_task = None


def _granted(waiter: _Waiter) -> _Slot | None:
    """The slot a waiter was given, if any (also marks a set exception as retrieved)."""
    future = waiter.future
    if future.done() and not future.cancelled() and future.exception() is None:
        return future.result()
    return None


# -- app wiring ----------------------------------------------------------------------------------

POOL: web.AppKey[EnginePool] = web.AppKey("engine_pool", EnginePool)


def install(app: web.Application, config: Any, metrics: Any = None) -> None:
    """Create the pool from the server's config (`proxy.config.ServerConfig`) now; open the shared
    engine connections and start health checks at start-up."""
    pool = EnginePool(config.engine_url, api_key=config.engine_api_key,
                      timeouts=EngineTimeouts(config.engine_connect_timeout, config.engine_first_token_timeout,
                                              config.engine_idle_timeout),
                      affinity_tokens=config.prefix_affinity_tokens, metrics=metrics,
                      max_concurrency=config.engine_max_concurrency, queue_timeout=config.engine_queue_timeout,
                      max_queue=config.engine_max_queue,
                      failure_threshold=config.engine_failure_threshold, cooldown=config.engine_cooldown)
    app[POOL] = pool

    async def start(app: web.Application) -> None:
        # idle connections are dropped after 4 s, before vLLM's uvicorn closes them (its default
        # keep-alive is 5 s), so a request rarely lands on a connection the engine is closing
        pool.attach(HTTPClient(limit=config.engine_max_connections, keepalive_timeout=4.0))
        pool.start_health_checks(config.health_check_interval)

    async def stop(app: web.Application) -> None:
        await pool.close()
        if pool.http is not None:
            await pool.http.close()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)


def pool_of(app: web.Application) -> EnginePool:
    pool = app.get(POOL)
    if pool is None or not pool.engines:
        raise RequestError(NO_ENGINE_MESSAGE, 503, "ServiceUnavailableError")
    return pool
