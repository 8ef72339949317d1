"""A bounded queue drained by coroutines on the library's background event loop.

Two ways in. ``offer`` is the hot path, shaped like the SDK's ``BatchSpanProcessor.on_end``: a
length check and a deque append into the *intake*. It wakes the pump (a thread-safe call, a
few microseconds) only when the pump sleeps with free slots and the intake was empty, or when
the intake is a quarter full: a busy pump looks at the intake whenever an evaluation finishes,
and every ``period_s`` anyway. An idle pump woken less than ``IDLE_WAKE_S`` (20 ms) after it
last looked at the intake waits out the rest before it looks again, so the offers that reach
it meanwhile wake nothing, and ``offer`` never reads the clock. (Without the idle wake-up, a
pipeline at rest started its next runs up to ``period_s`` late, all together, which kept them
in lockstep; without the 20 ms, runs sampled out one by one at a high rate would make every
``on_end`` wake the loop.) The pump turns each intake item into jobs (often
none) with ``admit``, in the order offered. ``submit`` queues a job directly, waking an idle pump.
Judge calls are I/O-bound, so ``concurrency`` coroutines on one event loop reach C / L
evaluations per second without a thread per call. The pump runs on the same loop as the judge
calls (:mod:`otel_scorers.background_loop`), so an evaluation never hops between threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Generic, TypeVar

from otel_scorers import background_loop

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Worker(Generic[T]):
    """Runs ``handle(item)`` for queued items, at most ``concurrency`` at a time."""

    #: An idle pump is woken by an offer at most this often (so that runs sampled out one by
    #: one at a high rate never make every ``on_end`` wake the loop).
    IDLE_WAKE_S = 0.02

    def __init__(self, handle: Callable[[T], Awaitable[object]], *, queue_size: int,
                 concurrency: int, periodic: Callable[[], None] | None = None,
                 period_s: float = 0.25,
                 admit: Callable[[Any], Sequence[T]] | None = None,
                 rejected: Callable[[T], None] | None = None,
                 shed: Callable[[Any], bool] | None = None) -> None:
        self._handle = handle
        self._admit = admit
        #: decides an offered item whose jobs the full queue would reject, rejecting them
        #: itself (``True``), more cheaply than ``admit`` then ``rejected`` would
        self._shed = shed
        self._rejected = rejected
        self._max = queue_size
        self._wake_at = max(1, queue_size // 4)
        self._concurrency = concurrency
        self._periodic = periodic
        self._period_s = period_s
        self._reset()

    def _reset(self) -> None:
        self._queue: deque[T] = deque()
        #: the items offered and not admitted yet (read on the hot path: its truth is
        #: whether any wait; the same deque for the worker's lifetime in a process)
        self.intake: deque[Any] = deque()
        self._intake = self.intake
        self._drained_at = 0.0
        self._inflight = 0
        #: the pump waits for a producer to wake it (and, before it started, needs starting)
        self._sleeping = True
        #: a wake-up the pump must not pace (see _paced)
        self._hurry = False
        self._stopping = False
        #: how many items the intake takes: the queue's bound, 0 once stopping (one test
        #: on the hot path for both)
        self._intake_max = self._max
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._pump: Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._start_lock = threading.Lock()
        self._idle = threading.Condition()

    def reset_after_fork(self) -> None:
        """In a forked child: forget the parent's pump and queue; start afresh lazily."""
        self._reset()

    # -- producer side (any thread) --------------------------------------------------------
    @property
    def depth(self) -> int:
        """Items waiting: offered and not yet admitted, or queued for a free slot."""
        return len(self._queue) + len(self._intake)

    @property
    def has_intake(self) -> bool:
        """Whether offered items wait to be admitted (on the hot path: a length test)."""
        return bool(self._intake)

    @property
    def inflight(self) -> int:
        return self._inflight

    def submit(self, item: T) -> bool:
        """Queue ``item``; ``False`` when the queue is full or the worker stopped (item dropped)."""
        if self._stopping or len(self._queue) >= self._max:
            return False
        self._queue.append(item)
        if self._pump is None:
            self._start()
        elif self._sleeping:
            self._wakeup()
        return True

    @property
    def full(self) -> bool:
        """No job can be queued now (the queue is at its bound, or the worker stops)."""
        return self._stopping or len(self._queue) >= self._max

    def offer(self, item: Any) -> bool:
        """Hand ``item`` to the pump's ``admit``; ``False`` when the intake is full or the worker
        stopped (the caller decides the item itself)."""
        intake = self._intake
        n = len(intake)
        if n >= self._intake_max:  # full, or stopping
            return False
        intake.append(item)
        if n == self._wake_at:
            self._wakeup()
        elif n == 0 and self._sleeping:  # no clock read here: the pump paces these wake-ups
            self._wakeup(hurry=False)  # itself (see _paced); the first one starts it
        return True

    def _take_intake(self, *, bounded: bool = True) -> None:
        """Admit what was offered, in order (the pump's thread; at stop, the stopping one);
        a job past the queue's bound is ``rejected`` unless not ``bounded``."""
        self._drained_at = time.monotonic()
        intake, admit, shed = self._intake, self._admit, self._shed
        while intake:
            try:
                item = intake.popleft()
            except IndexError:  # taken by a concurrent stop
                return
            if bounded and shed is not None and len(self._queue) >= self._max and shed(item):
                continue
            for job in (admit(item) if admit is not None else (item,)):
                if bounded and len(self._queue) >= self._max:
                    if self._rejected is not None:
                        self._rejected(job)
                else:
                    self._queue.append(job)

    def _wakeup(self, *, hurry: bool = True) -> None:
        """Wake the pump (start it, the first time); ``hurry``: it does not pace itself
        first (a flush, a stop, a job queued, a quarter-full intake)."""
        if hurry:
            self._hurry = True
        self._sleeping = False
        if self._pump is None:
            if not self._stopping:
                self._start()
            return
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # loop closed during interpreter exit
                loop.call_soon_threadsafe(wake.set)

    def start(self) -> None:
        """Start the pump (and its periodic task) now, if it is not running yet."""
        if self._pump is None and not self._stopping:
            self._start()

    def _start(self) -> None:
        with self._start_lock:
            if self._pump is None:
                self._pump = background_loop.submit(self._run())

    # -- the pump ---------------------------------------------------------------------------
    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        last_periodic = time.monotonic()
        self._tick()
        try:
            while True:
                if self._intake:
                    self._hurry = False
                    self._take_intake()
                while self._queue and self._inflight < self._concurrency:
                    item = self._queue.popleft()
                    self._inflight += 1
                    task = self._loop.create_task(self._one(item))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                if (self._stopping and not self._queue and not self._intake
                        and self._inflight == 0):
                    return
                wake.clear()
                if self._inflight < self._concurrency:
                    # Idle: producers wake us. (At full concurrency only a finishing evaluation
                    # does, so a busy pump never ping-pongs with the application's threads.)
                    self._sleeping = True
                    if self._queue or self._intake:  # offered before we slept: no wake-up
                        self._sleeping = False
                        continue
                await wake.wait()  # an offer, a finished evaluation, or the period's tick
                self._sleeping = False
                await self._paced()
                now = time.monotonic()
                if self._periodic is not None and now - last_periodic >= self._period_s:
                    last_periodic = now
                    self._run_periodic()
        finally:
            if self._ticker is not None:
                self._ticker.cancel()
            with self._idle:
                self._idle.notify_all()

    def _tick(self) -> None:
        """Wake the pump every ``period_s`` (its periodic work, an idle pump's look): one
        timer for the pump's life, not a timeout armed and cancelled on every wait."""
        if self._wake is not None and self._loop is not None:
            self._wake.set()
            self._ticker = self._loop.call_later(self._period_s, self._tick)

    async def _paced(self) -> None:
        """Woken by an offer into an empty intake less than ``IDLE_WAKE_S`` after the last
        look at it: wait out the rest first, so that runs offered one by one at a high rate
        wake the loop at most once per ``IDLE_WAKE_S``, whatever their rate. Not when jobs
        wait, the intake is a quarter full or the worker stops; a hurried wake-up meanwhile
        (a flush, a stop, the intake reaching a quarter) ends the wait. ``_hurry`` is set
        before the event, and read here after the event is cleared, so none is missed."""
        wake = self._wake
        if (wake is None or not self._intake or self._queue or self._stopping
                or len(self._intake) >= self._wake_at):
            return
        deadline = self._drained_at + self.IDLE_WAKE_S
        while not self._hurry:
            pause = deadline - time.monotonic()
            if pause <= 0:
                return
            wake.clear()
            if self._hurry:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await background_loop.within(wake.wait(), pause)

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
            if not self._queue and not self._intake and self._inflight == 0:
                with self._idle:
                    self._idle.notify_all()

    # -- flush and stop ----------------------------------------------------------------------
    def flush(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or in flight; ``False`` if the deadline passed first."""
        deadline = time.monotonic() + timeout_s
        if self._pump is None:
            return not self._queue and not self._intake
        if background_loop.in_loop():
            raise RuntimeError("force_flush() called from the otel-scorers event loop")
        self._wakeup()
        with self._idle:
            while self._queue or self._intake or self._inflight:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._pump.done():
                    return False
                self._idle.wait(min(remaining, 0.1))
        return True

    def stop(self, timeout_s: float) -> list[T]:
        """Drain within ``timeout_s``, then cancel what is left; returns the unstarted items."""
        self._stopping = True
        self._intake_max = 0
        pump = self._pump
        if pump is None:
            return self._abandon()
        self._wakeup()
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    pump.result(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
                    return []
                except FutureTimeout:
                    # the loop stops at interpreter exit (possibly before us): do not wait on it
                    if time.monotonic() >= deadline or not self._loop_running():
                        raise
        except FutureTimeout:
            left = self._abandon()
            loop = self._loop
            if loop is not None and loop.is_running():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._cancel_all)
                with contextlib.suppress(Exception):
                    pump.result(timeout=2.0)
            return left
        except Exception:  # the pump died: whatever is queued will never run
            logger.exception("otel-scorers worker stopped with an error")
            return self._abandon()

    def _loop_running(self) -> bool:
        return self._loop is not None and self._loop.is_running()

    def _abandon(self) -> list[T]:
        """The unstarted jobs, the intake admitted first (their decisions are made here)."""
        self._take_intake(bounded=False)
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
