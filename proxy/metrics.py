"""Prometheus metrics: `/metrics` and the small API the routes call.

Every app owns its own `CollectorRegistry` (tests start several apps in one process; a global
registry would make their counters collide). Names carry the `derender_proxy_` prefix and follow
vLLM's where the meaning is the same (`time_to_first_token_seconds`, `inter_token_latency_seconds`,
`e2e_request_latency_seconds`, `prompt_tokens_total`, `generation_tokens_total`), so an SRE's vLLM
dashboards translate by swapping the prefix.

The API, for the route and engine code (all calls are cheap: label children are cached):

    from proxy.metrics import metrics_of
    m = metrics_of(request.app)
    m.observe_ttft(seconds)                 # engine request sent -> first token received (streamed)
    m.observe_overhead(seconds)             # the proxy's own share of a stream's time to first token
    m.observe_itl(seconds)                  # gap between two consecutive engine chunks
    m.add_tokens(prompt, generated, request=request)   # once per engine request, at its end
    m.engine_error(engine_url, kind)        # kind: "connect", "status", "stream", "timeout", ...
    m.engine_retry(engine_url)              # a request moved away from this engine
    m.abort(cause)                          # cause: "client_disconnect", "stop_string", "timeout",
                                            #        "shutdown", ...
    m.connection_refused()                  # a connection past --max-connections (proxy/serving.py)

and for the engine pool (`proxy/engine/pool.py`):

    m.engine_status(engine_url, circuit_state, outstanding)  # circuit: closed | half_open | open
    m.engine_opened(engine_url)             # the engine's circuit opened (taken out of rotation)
    m.queue_length(n)                       # requests waiting for a slot (--engine-max-concurrency)
    m.observe_queue_wait(seconds)           # time one request spent in that queue
    m.shed(reason)                          # 503 without calling an engine: "unavailable" (all open),
                                            # "queue_timeout", "queue_full" (--engine-queue-timeout 0, or --engine-max-queue reached)

Request counts, in-flight requests and end-to-end latency are recorded by the outermost
middleware (`proxy/access_log.py`) for every route: handlers do nothing for those.

`--workers N`: prometheus-client's multiprocess mode. The supervisor (`proxy/serving.py`) calls
`prepare_workers()` before it starts them: every worker then keeps its series in files under one
directory ($PROMETHEUS_MULTIPROC_DIR, or a temporary one), and whichever worker answers
`/metrics` reads them all: counters and histograms summed over workers (the counts of a worker
that died stay: counters never go back), gauges summed (in-flight, outstanding, queue) or the
worst (circuit state, loop lag) over the live workers (`worker_exited(pid)` drops a dead one's).
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from proxy import trace_context
from proxy.engine.circuit import STATE_VALUES as CIRCUIT_STATE_VALUES

log = logging.getLogger("derender_proxy.metrics")

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
PREFIX = "derender_proxy_"
METRICS_PATH = "/metrics"

# vLLM's buckets, with the sub-10 ms end added: our own overhead lives there
TTFT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
               0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
               20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
                 120.0)
# the proxy's own part of a time to first token: fractions of a millisecond to a few (long prompts)
OVERHEAD_BUCKETS = (0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01,
                    0.025, 0.05, 0.1, 0.25, 1.0)
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
LOOP_LAG_INTERVAL = 0.25  # seconds between two event-loop lag probes


class ProxyMetrics:
    """All metrics of one app, on one registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            PREFIX + "requests", "HTTP requests handled, by route template, method and status.",
            ["route", "method", "status"], registry=r)
        self.multiprocess = multiprocess_dir() is not None
        self.in_flight = Gauge(
            PREFIX + "requests_in_flight", "HTTP requests being handled (streams included).",
            registry=r, multiprocess_mode="livesum")
        self.e2e = Histogram(
            PREFIX + "e2e_request_latency_seconds",
            "Request arrival to last byte of the response, by route template.", ["route"],
            buckets=E2E_BUCKETS, registry=r)
        self.ttft = Histogram(
            PREFIX + "time_to_first_token_seconds",
            "Engine request sent to first token received (front door routes).",
            buckets=TTFT_BUCKETS, registry=r)
        self.overhead = Histogram(
            PREFIX + "first_token_overhead_seconds",
            "The proxy's own share of a streamed request's time to first token: from the request's arrival "
            "to the engine request (body, validation, render), plus from the engine's first token to the "
            "first events written (derender, SSE). Time spent waiting on engines is not in it.",
            buckets=OVERHEAD_BUCKETS, registry=r)
        self.itl = Histogram(
            PREFIX + "inter_token_latency_seconds",
            "Time between two consecutive engine chunks of one request.",
            buckets=ITL_BUCKETS, registry=r)
        self.prompt_tokens = Counter(
            PREFIX + "prompt_tokens", "Prompt tokens sent to engines.", registry=r)
        self.generation_tokens = Counter(
            PREFIX + "generation_tokens", "Tokens generated by engines and derendered.", registry=r)
        self.engine_errors = Counter(
            PREFIX + "engine_errors", "Failed engine calls, by engine URL and kind of failure.",
            ["engine", "kind"], registry=r)
        self.engine_retries = Counter(
            PREFIX + "engine_retries",
            "Requests retried on another engine after this engine failed before the first token.",
            ["engine"], registry=r)
        self.engine_circuit_state = Gauge(
            PREFIX + "engine_circuit_state",
            "Circuit breaker state of each engine: 0 closed (in rotation), 1 half-open (one probe), "
            "2 open (taken out after failures or unreachable); with --workers, the worst any worker sees.",
            ["engine"], registry=r, multiprocess_mode="livemax")
        self.engine_outstanding = Gauge(
            PREFIX + "engine_outstanding_requests", "Requests outstanding on each engine.", ["engine"],
            registry=r, multiprocess_mode="livesum")
        self.engine_circuit_opened = Counter(
            PREFIX + "engine_circuit_opened",
            "Times an engine was taken out of rotation (failure threshold, refused connection, failed "
            "health check).", ["engine"], registry=r)
        self.queue_waiting = Gauge(
            PREFIX + "engine_queue_length",
            "Requests waiting for a free engine slot (--engine-max-concurrency).", registry=r,
            multiprocess_mode="livesum")
        self.queue_wait = Histogram(
            PREFIX + "engine_queue_wait_seconds",
            "Time requests spent waiting for a free engine slot (served, timed out or cancelled).",
            buckets=QUEUE_BUCKETS, registry=r)
        self.shed_requests = Counter(
            PREFIX + "requests_shed",
            "Requests answered 503 without calling an engine, by reason: unavailable (every engine "
            "open), queue_timeout, queue_full.", ["reason"], registry=r)
        self.aborts = Counter(
            PREFIX + "aborts", "Engine requests aborted, by cause.", ["cause"], registry=r)
        self.connections_refused = Counter(
            PREFIX + "connections_refused",
            "Client connections answered 503 and closed because the process held --max-connections.",
            registry=r)
        self.loop_lag = Histogram(
            PREFIX + "event_loop_lag_seconds",
            f"Scheduling delay of a probe that sleeps {LOOP_LAG_INTERVAL}s on the event loop.",
            buckets=LAG_BUCKETS, registry=r)
        self.loop_lag_last = Gauge(
            PREFIX + "event_loop_lag_last_seconds",
            "Most recent event-loop lag probe (with --workers, the largest of the workers').", registry=r,
            multiprocess_mode="livemax")
        self._request_children: dict[tuple[str, str, int], Any] = {}
        self._e2e_children: dict[str, Any] = {}
        self._engine_children: dict[str, tuple[Any, Any]] = {}

    # --- the API for routes and engine code -------------------------------------------------------

    def observe_ttft(self, seconds: float) -> None:
        """Time from sending the engine request to receiving its first token."""
        self.ttft.observe(seconds)

    def observe_overhead(self, seconds: float) -> None:
        """The proxy's own time on a stream's path to its first token (what it adds to TTFT)."""
        self.overhead.observe(seconds)

    def observe_itl(self, seconds: float) -> None:
        """Gap between two consecutive engine chunks of one request (one call per chunk after the first)."""
        self.itl.observe(seconds)

    def add_tokens(self, prompt: int, generated: int, request: web.Request | None = None) -> None:
        """Count one engine request's tokens; with `request`, they also go into its access-log line.

        Call once per engine request when it ends (n>1 and multi-prompt completions: once per engine
        request, the access log sums them).
        """
        if prompt:
            self.prompt_tokens.inc(prompt)
        if generated:
            self.generation_tokens.inc(generated)
        if request is not None:
            tokens = request.get(TOKENS_KEY)
            if tokens is None:
                request[TOKENS_KEY] = [prompt, generated]
            else:
                tokens[0] += prompt
                tokens[1] += generated

    def engine_error(self, engine: str, kind: str = "error") -> None:
        """An engine call failed (connect refused, error status, broken stream, timeout, ...)."""
        self.engine_errors.labels(engine, kind).inc()

    def engine_retry(self, engine: str) -> None:
        """A request that failed on `engine` before its first token is being retried elsewhere."""
        self.engine_retries.labels(engine).inc()

    def engine_status(self, engine: str, circuit_state: str, outstanding: int) -> None:
        """An engine's circuit state (closed | half_open | open) and outstanding requests changed."""
        children = self._engine_children.get(engine)
        if children is None:  # twice per engine request: label lookups cached
            children = self._engine_children[engine] = (self.engine_circuit_state.labels(engine),
                                                        self.engine_outstanding.labels(engine))
        children[0].set(CIRCUIT_STATE_VALUES[circuit_state])
        children[1].set(outstanding)

    def engine_opened(self, engine: str) -> None:
        """The engine's circuit opened: it gets no requests until its cooldown ends."""
        self.engine_circuit_opened.labels(engine).inc()

    def queue_length(self, waiting: int) -> None:
        self.queue_waiting.set(waiting)

    def observe_queue_wait(self, seconds: float) -> None:
        """Time one request spent waiting for an engine slot (called in that request's task)."""
        self.queue_wait.observe(seconds)
        trace_context.queued(seconds)

    def shed(self, reason: str) -> None:
        """A request got a 503 from the pool itself: unavailable, queue_timeout or queue_full."""
        self.shed_requests.labels(reason).inc()

    def abort(self, cause: str) -> None:
        """An engine request was aborted: client_disconnect, stop_string, timeout, shutdown, ..."""
        self.aborts.labels(cause).inc()

    def connection_refused(self) -> None:
        """A client connection past --max-connections got its 503 and was closed (`proxy/serving.py`)."""
        self.connections_refused.inc()

    # --- used by the request middleware --------------------------------------------------------

    def request_done(self, route: str, method: str, status: int, seconds: float) -> None:
        if method not in KNOWN_METHODS:
            method = "other"  # clients choose the method token: keep the label set bounded
        key = (route, method, status)
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children[key] = self.requests.labels(route, method, str(status))
        child.inc()
        e2e = self._e2e_children.get(route)
        if e2e is None:
            e2e = self._e2e_children[route] = self.e2e.labels(route)
        e2e.observe(seconds)

    def render(self) -> bytes:
        if self.multiprocess:  # every worker's series, read from their files
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)


def request_key(name: str, kind: type) -> Any:
    """A typed request-storage key where aiohttp has them (3.13+), else a plain string."""
    key_type = getattr(web, "RequestKey", None)
    return key_type(name, kind) if key_type is not None else f"derender_proxy.{name}"


# request-scoped [prompt, generated] token counts, read by the access log
TOKENS_KEY = request_key("tokens", list)
ARRIVAL_KEY = request_key("arrival", float)  # time.perf_counter() when the request reached the app

METRICS: web.AppKey[ProxyMetrics] = web.AppKey("metrics", ProxyMetrics)
_PROBE: web.AppKey[asyncio.Task] = web.AppKey("metrics_probe", asyncio.Task)


def metrics_of(app: web.Application) -> ProxyMetrics:
    """The app's metrics (created by `install`, which `create_app` calls)."""
    return app[METRICS]


async def metrics_handler(request: web.Request) -> web.Response:
    body = metrics_of(request.app).render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _probe_loop_lag(metrics: ProxyMetrics, interval: float) -> None:
    """Sleep `interval` again and again; whatever comes on top is time the loop was busy elsewhere."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(interval)
        lag = max(0.0, loop.time() - start - interval)
        metrics.loop_lag.observe(lag)
        metrics.loop_lag_last.set(lag)


def install(app: web.Application) -> None:
    """Create the app's registry, add GET /metrics and the event-loop lag probe."""
    # no `*_created` timestamp series: they double the exposition and no dashboard reads them
    disable_created_metrics()
    metrics = ProxyMetrics()
    app[METRICS] = metrics
    app.router.add_get(METRICS_PATH, metrics_handler)
    probe_key = _PROBE

    async def start_probe(app: web.Application) -> None:
        app[probe_key] = asyncio.get_running_loop().create_task(
            _probe_loop_lag(metrics, LOOP_LAG_INTERVAL), name="event-loop-lag-probe")

    async def stop_probe(app: web.Application) -> None:
        task = app.get(probe_key)
        if task is not None:
            task.cancel()

    app.on_startup.append(start_probe)
    app.on_cleanup.append(stop_probe)


# -- --workers: one /metrics for all workers ------------------------------------------------------

def multiprocess_dir() -> str | None:
    """The directory of the workers' metric files when multiprocess mode is on (else None)."""
    return os.environ.get(MULTIPROC_DIR_ENV) or None


def prepare_workers() -> Callable[[], None]:
    """In the supervisor, before the workers start: the directory they keep their series in, made
    empty ($PROMETHEUS_MULTIPROC_DIR when set, else a new temporary one), named in the environment
    they inherit. Returns what to call once they have all exited (removes a temporary directory).

    It must be set before a worker creates its first metric (prometheus-client picks its value
    class then): spawned workers inherit it before they import anything."""
    path = multiprocess_dir()
    made = path is None
    if path is None:
        path = tempfile.mkdtemp(prefix="derender-proxy-metrics-")
        os.environ[MULTIPROC_DIR_ENV] = path
    else:
        os.makedirs(path, exist_ok=True)
        for old in glob.glob(os.path.join(path, "*.db")):  # a previous run's series would be added in
            os.remove(old)
    log.info("workers share their metrics", extra={"fields": {"metrics_dir": path}})

    def cleanup() -> None:
        if made:
            shutil.rmtree(path, ignore_errors=True)
            os.environ.pop(MULTIPROC_DIR_ENV, None)

    return cleanup


def worker_exited(pid: int) -> None:
    """A worker is gone: its gauges leave the sums (its counters and histograms stay)."""
    path = multiprocess_dir()
    if path is not None:
        mark_process_dead(pid, path)


def monotonic() -> float:
    """The clock every latency here is measured with (monotonic, in seconds)."""
    return time.perf_counter()
