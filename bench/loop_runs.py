"""The loop benchmark's records (`bench/loop.py`): what a run is, what one request measured, what a
run cost, and the pure arithmetic on them (percentiles, histogram quantiles, CPU between readings)."""

from __future__ import annotations

import bisect
import math
import os
import statistics
from dataclasses import dataclass, field


JSON_HEADERS = {"Content-Type": "application/json"}


def bucket_quantile(q: float, cumulative: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative bucket counts (linear within a bucket)."""
    bounds = sorted(cumulative)
    counts = [cumulative[b] for b in bounds]
    total = counts[-1] if counts else 0.0
    if not total:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in zip(bounds, counts):
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


@dataclass(frozen=True)
class Target:
    """One run: where its requests go and whose CPU they cost (the engine's for direct)."""
    name: str
    url: str
    body: bytes
    pid: int
    tag_in_body: bool = False  # the engine request is named after the body's request_id (Responses)

    def tagged(self, tag: str) -> tuple[bytes, dict[str, str]]:
        """The body and headers that name the engine request after `tag`: the X-Request-Id header
        (the engine's id for the direct request, the proxy's engine request id for chat completions
        and Messages) or the Responses body's request_id (what the proxy names it after)."""
        if self.tag_in_body:
            return self.body[:-1] + b',"request_id":"' + tag.encode() + b'"}', JSON_HEADERS
        return self.body, {**JSON_HEADERS, "X-Request-Id": tag}


@dataclass
class Sample:
    """One request of the mixed phase."""
    run: int  # index in the targets: 0 direct, then the APIs
    order: int  # start order within the phase
    ttft: float
    tokens: int
    seconds: float  # start to the last event
    start: float = 0.0  # perf_counter when sent
    engine_ttft: float = math.nan  # the engine's own arrival to first token written, for this request
    cpu: float = 0.0  # concurrency 1 only: the serving process's CPU over the request, settled
    client_cpu: float = 0.0  # concurrency 1 only: this client's CPU over the request
    buckets: dict[float, float] = field(default_factory=dict)  # concurrency 1 only: its first-token overhead


@dataclass
class Cost:
    """A run's CPU and throughput, from `phase`: at concurrency 1 the mixed phase's per-request
    readings, above it the per-API segments."""
    phase: str
    requests: int
    tokens: int
    cpu: float  # the serving process's CPU seconds (the engine's for direct)
    seconds: float  # wall seconds the requests streamed, for tokens/s
    client_cpu: float
    round_rates: list[float]  # tokens per CPU-second, round by round
    buckets: dict[float, float]  # the proxy's first-token-overhead histogram (cumulative counts)

    @property
    def rate(self) -> float:
        return self.tokens / self.cpu if self.cpu > 0 else math.nan

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else math.nan

    def ms_per_request(self, seconds: float) -> str:
        return f"{seconds / max(self.requests, 1) * 1000:.2f}"


@dataclass
class Run:
    """One run at one level: its TTFTs from the mixed phase, its costs from `cost.phase`."""
    name: str
    ttfts: list[float]  # sorted
    round_p50s: list[float]  # TTFT p50 in each round of the mixed phase (nan: no request there)
    cost: Cost
    ttft_phase: str = "mixed"  # where the TTFTs come from ("first-token" at concurrency 1)
    # the TTFTs less the engine's own time to first token of the same request, sorted, and per round
    own_ttfts: list[float] = field(default_factory=list)
    round_own_p50s: list[float] = field(default_factory=list)
    judged_cost: Cost | None = None  # above concurrency 1: from the per-API proxies, interleaved

    @property
    def compared_cost(self) -> Cost:
        """The cost compared with chat's: the per-API proxies' where measured, else `cost`."""
        return self.judged_cost or self.cost

    @property
    def p50(self) -> float:
        return statistics.median(self.ttfts)

    @property
    def p99(self) -> float:
        return self.ttfts[min(len(self.ttfts) - 1, int(len(self.ttfts) * 0.99))]


def add_buckets(parts: list[dict[float, float]]) -> dict[float, float]:
    total: dict[float, float] = {}
    for part in parts:
        for bound, count in part.items():
            total[bound] = total.get(bound, 0.0) + count
    return total


def p50_or_nan(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


# the answer's cap in the first-token phase: the first event leaves with the first token, so a cap
# changes nothing before it, and short answers buy many more first tokens per minute
FIRST_TOKEN_CAP = 16


def own_ttfts(samples: list[Sample]) -> list[float]:
    """Each request's TTFT less its engine's own time to first token: the engine's wait for its
    first step (its timer's jitter, shared with the client's CPU) is no part of what the front
    doors add."""
    return sorted(s.ttft - s.engine_ttft for s in samples if math.isfinite(s.engine_ttft))


def cpu_at(readings: list[tuple[float, list[float]]], t: float, i: int) -> float:
    """Process i's CPU seconds at time t, linear between the readings around it."""
    times = [r[0] for r in readings]
    k = min(max(bisect.bisect_left(times, t), 1), len(readings) - 1)
    (t0, c0), (t1, c1) = readings[k - 1], readings[k]
    return c0[i] + (c1[i] - c0[i]) * (t - t0) / (t1 - t0) if t1 > t0 else c1[i]


def tokens_in(samples: list[Sample], a: float, b: float) -> float:
    """The engine tokens the samples streamed between a and b, each request's spread evenly from its
    first event to its last (the engine paces them evenly)."""
    total = 0.0
    for s in samples:
        first, last = s.start + s.ttft, s.start + s.seconds
        if last > first:
            total += s.tokens * max(0.0, min(b, last) - max(a, first)) / (last - first)
    return total


def cpu_sets(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """(CPUs of the proxy, CPUs of the engine and this client), or (None, None) unpinned."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return None, None
    return {cpus[-1]}, set(cpus[:-1])


def percentile_ms(v: float) -> str:
    return f"{v * 1000:.2f}"


def ratio(value: float, chat: float) -> float:
    return value / chat if chat else math.nan
