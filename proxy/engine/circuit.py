"""One engine's circuit breaker: whether the pool may send it requests (sans-IO, own clock).

    closed --(K consecutive failures, or unreachable)--> open --(cooldown)--> half_open
    half_open --(probe starts generating)--> closed;  half_open --(probe fails)--> open

* **What counts as a failure** (`proxy.engine.pool.counts_against_engine`): connection refused or broken, a hang-up
  before the answer, a timeout, a 5xx answer, a stream cut or an error event with a 5xx (or no)
  code, a response that breaks the protocol. These say the engine (or the path to it) is in
  trouble. A 4xx is the client's request (bad parameters, too long a prompt): it never counts,
  or one client could shut an engine off for everyone. A request we end ourselves (client gone,
  stop string) is no outcome at all.
* **Unreachable opens at once:** a refused connection or a failed `/health` poll is not a
  probability, the engine is not listening. Such an engine also closes as soon as `/health`
  answers again. An engine opened for failing requests is not closed by `/health` (its `/health`
  is typically fine while its generate fails): only a real request, after the cooldown, proves it.
* **Half-open** lets one request through at a time (the probe); the others go elsewhere or wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CLOSED, HALF_OPEN, OPEN = "closed", "half_open", "open"
STATE_VALUES = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}  # the engine_circuit_state gauge
UNREACHABLE, FAILING = "unreachable", "failing"


class Circuit:
    def __init__(self, failure_threshold: int = 5, cooldown: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failure_threshold = failure_threshold  # 0: only unreachable engines are opened
        self.cooldown = cooldown
        self.clock = clock
        self._state = CLOSED
        self.failures = 0  # consecutive
        self.reason: str | None = None  # why it is open / half-open: UNREACHABLE or FAILING
        self.open_until = 0.0
        self.probing = False  # a half-open probe is in flight

    @property
    def state(self) -> str:
        if self._state == OPEN and self.clock() >= self.open_until:
            self._state = HALF_OPEN
            self.probing = False
        return self._state

    def allows(self) -> bool:
        """May a new request be sent now (closed, or half-open with no probe in flight)?"""
        state = self.state
        return state == CLOSED or (state == HALF_OPEN and not self.probing)

    def usable(self) -> bool:
        """Not open: requests may be sent now or soon (worth waiting for a slot)."""
        return self.state != OPEN

    def take(self) -> bool:
        """A request is being sent; True if it is the half-open probe."""
        if self.state == HALF_OPEN and not self.probing:
            self.probing = True
            return True
        return False

    def probe_over(self) -> None:
        self.probing = False

    def trip(self, reason: str) -> None:
        """Open now (again), for a full cooldown."""
        self._state = OPEN
        self.reason = reason
        self.failures = 0
        self.probing = False
        self.open_until = self.clock() + self.cooldown

    def failure(self) -> bool:
        """A request failed on this engine; True if that opened the circuit."""
        state = self.state
        if state == OPEN:
            return False
        if state == HALF_OPEN:
            self.trip(self.reason or FAILING)
            return True
        self.failures += 1
        if self.failure_threshold > 0 and self.failures >= self.failure_threshold:
            self.trip(FAILING)
            return True
        return False

    def started(self) -> bool:
        """A request got its first token: a half-open engine closes. True if it closed now."""
        if self.state == HALF_OPEN:
            self._close()
            return True
        return False

    def success(self) -> bool:
        """A request completed: consecutive failures reset; True if the circuit closed now."""
        closed_now = self.started()
        if self._state == CLOSED:
            self.failures = 0
        return closed_now

    def reachable(self) -> bool:
        """A /health poll succeeded: an engine opened for being unreachable closes. True if it did."""
        if self._state != CLOSED and self.reason == UNREACHABLE:
            self._close()
            return True
        return False

    def _close(self) -> None:
        self._state = CLOSED
        self.reason = None
        self.failures = 0
        self.probing = False
