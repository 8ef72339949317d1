"""A bounded queue drained by coroutines on a background event loop, with bounded concurrency.

``submit`` is the hot path: a length check and a deque append, plus a thread-safe wake-up only
when the loop is asleep. Judge calls are I/O-bound, so one event loop thread with ``concurrency``
coroutines in flight reaches C / L evaluations per second without a thread per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Worker(Generic[T]):
    """Runs ``handle(item)`` for queued items on a daemon thread's event loop."""

    def __init__(self, handle: Callable[[T], Awaitable[None]], *, queue_size: int,
                 concurrency: int, name: str = "otel-scorers-worker",
                 periodic: Callable[[], None] | None = None, period_s: float = 0.25) -> None:
        self._handle = handle
        self._max = queue_size
        self._concurrency = concurrency
        self._name = name
        self._periodic = periodic
        self._period_s = period_s
        self._reset()

    def _reset(self) -> None:
        self._queue: deque[T] = deque()
        self._inflight = 0
        self._sleeping = False
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._start_lock = threading.Lock()
        self._idle = threading.Condition()
        self._ready = threading.Event()

    def reset_after_fork(self) -> None:
        """In a forked child: forget the parent's thread, loop and queue; start afresh lazily."""
        self._reset()

    # -- producer side (any thread) --------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def inflight(self) -> int:
        return self._inflight

    def submit(self, item: T) -> bool:
        """Queue ``item``; ``False`` when the queue is full or the worker stopped (item dropped)."""
        if self._stopping or len(self._queue) >= self._max:
            return False
        self._queue.append(item)
        if self._thread is None:
            self._start()
        elif self._sleeping:
            self._wakeup()
        return True

    def _wakeup(self) -> None:
        self._sleeping = False
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # loop closed during shutdown
                loop.call_soon_threadsafe(wake.set)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._main, name=self._name, daemon=True)
            self._thread = thread
            thread.start()
        self._ready.wait(5.0)

    # -- the loop ---------------------------------------------------------------------------
    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._run())
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            with self._idle:
                self._idle.notify_all()

    async def _run(self) -> None:
        self._wake = asyncio.Event()
        self._ready.set()
        last_periodic = time.monotonic()
        while True:
            while self._queue and self._inflight < self._concurrency:
                item = self._queue.popleft()
                self._inflight += 1
                task = asyncio.get_running_loop().create_task(self._one(item))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if self._stopping and not self._queue and self._inflight == 0:
                return
            self._wake.clear()
            self._sleeping = True
            if self._queue and self._inflight < self._concurrency:
                self._sleeping = False
                continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._period_s)
            self._sleeping = False
            now = time.monotonic()
            if self._periodic is not None and now - last_periodic >= self._period_s:
                last_periodic = now
                self._run_periodic()

    def _run_periodic(self) -> None:
        try:
            self._periodic()  # type: ignore[misc]
        except Exception:
            logger.exception("otel-scorers periodic task failed")

    async def _one(self, item: T) -> None:
        try:
            await self._handle(item)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("otel-scorers evaluation failed unexpectedly")
        finally:
            self._inflight -= 1
            if self._wake is not None:
                self._wake.set()
            if not self._queue and self._inflight == 0:
                with self._idle:
                    self._idle.notify_all()

    # -- flush and stop ----------------------------------------------------------------------
    def flush(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or in flight; ``False`` if the deadline passed first."""
        deadline = time.monotonic() + timeout_s
        if self._thread is None:
            return not self._queue
        self._wakeup()
        with self._idle:
            while self._queue or self._inflight:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._idle.wait(min(remaining, 0.1))
        return True

    def stop(self, timeout_s: float) -> list[T]:
        """Drain within ``timeout_s``, then cancel what is left; returns the unstarted items."""
        self._stopping = True
        thread = self._thread
        if thread is None:
            left = list(self._queue)
            self._queue.clear()
            return left
        self._wakeup()
        thread.join(timeout_s)
        if thread.is_alive():
            left = self._abandon()
            loop = self._loop
            if loop is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._cancel_all)
            thread.join(2.0)
            return left
        return []

    def _abandon(self) -> list[T]:
        left: list[T] = []
        while self._queue:
            try:
                left.append(self._queue.popleft())
            except IndexError:
                break
        return left

    def _cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
