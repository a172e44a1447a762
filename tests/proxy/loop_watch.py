"""Watch the event loop while a request runs: how long did it go without a turn?

A ticker sleeps 2 ms at a time on the loop; the longest gap between its wake-ups is the longest
stall. Tests compare it with the request's own duration (a loop that never ran during the
request stalls for all of it), which stays meaningful on a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def watch_loop(work: Awaitable[T]) -> tuple[T, float, list[float]]:
    """Run `work`; return its result, its duration in seconds, and the ticker's gaps."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    try:
        result = await work
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        await tick
    return result, elapsed, gaps


def assert_loop_kept_running(gaps: list[float], elapsed: float) -> None:
    longest = max(gaps, default=elapsed)
    assert longest < max(0.1, elapsed / 3), f"event loop stalled {longest * 1e3:.0f} ms of {elapsed * 1e3:.0f} ms"
