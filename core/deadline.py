"""A deadline for a block of Python code in the current thread, enforced from outside it.

`with deadline(seconds): ...` raises `DeadlineExceeded` in this thread once the block has run
`seconds`, wherever its Python code is: one watchdog thread for the process keeps every deadline
in a heap and, when one passes, asks CPython to raise the exception in that thread at its next
bytecode (PyThreadState_SetAsyncExc). A single long C call is not interrupted (the caller bounds
those otherwise); the exception is never raised after the block has ended.

Used for the templates requests bring (`core.template_sandbox`), whose loops may build nothing
and never end. `DeadlineExceeded` derives from BaseException, so no `except Exception` between
the raise and the caller's handler can swallow it.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import itertools
import threading
import time
from collections.abc import Iterator


class DeadlineExceeded(BaseException):
    """The block ran past its deadline (raised asynchronously in its thread)."""


# CPython's PyThreadState_SetAsyncExc(thread id, exception): raise it in that thread at its next
# bytecode; with NULL, take back one not raised yet
_SET_ASYNC_EXC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_CLEAR_ASYNC_EXC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


class _Alarm:
    __slots__ = ("thread_id", "deadline", "lock", "fired", "disarmed")

    def __init__(self, seconds: float) -> None:
        self.thread_id = threading.get_ident()
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.fired = False
        self.disarmed = False

    def fire(self) -> None:
        with self.lock:
            if not self.disarmed:
                self.fired = True
                _SET_ASYNC_EXC(self.thread_id, DeadlineExceeded)

    def disarm(self) -> None:
        with self.lock:
            self.disarmed = True
            if self.fired:  # raised already (then this is a no-op), or still pending: never let it out
                _CLEAR_ASYNC_EXC(self.thread_id, None)


class _Watchdog:
    """One daemon thread for every deadline of the process (a heap of alarms)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.alarms: list[tuple[float, int, _Alarm]] = []
        self.order = itertools.count()
        self.thread: threading.Thread | None = None

    def arm(self, seconds: float) -> _Alarm:
        alarm = _Alarm(seconds)
        with self.cond:
            heapq.heappush(self.alarms, (alarm.deadline, next(self.order), alarm))
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="template-watchdog", daemon=True)
                self.thread.start()
            self.cond.notify()
        return alarm

    def _run(self) -> None:
        with self.cond:
            while True:
                while self.alarms and self.alarms[0][2].disarmed:
                    heapq.heappop(self.alarms)
                if not self.alarms:
                    self.cond.wait()
                    continue
                wait = self.alarms[0][0] - time.monotonic()
                if wait > 0:
                    self.cond.wait(wait)
                    continue
                heapq.heappop(self.alarms)[2].fire()


_WATCHDOG = _Watchdog()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise DeadlineExceeded in this thread if the block runs longer than `seconds` (Python code
    only: a single C call is not interrupted, which is why the sandbox bounds those by size)."""
    if seconds <= 0:
        yield
        return
    alarm = _WATCHDOG.arm(seconds)
    try:
        yield
    finally:
        alarm.disarm()
