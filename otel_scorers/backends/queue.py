"""Results on their way to the backends: bounded, batched, retried, counted, never on the
application's hot path, and each backend on its own.

:meth:`SinkQueue.offer` is called on the library's background loop when an evaluation is
emitted; it never waits: past ``max_items`` results, or ``max_bytes`` of them (their JSON
size: a few large rubric results weigh what thousands of small ones do), waiting for a sink a
result is dropped for that sink and counted (``queue_full``). Each sink has a lane of its own
(its waiting results and one task draining them in batches of the sink's ``max_batch``), so a
slow or hung backend holds only its own results, never another's. A batch the backend refuses
outright is written again item by item, so one bad result never takes the others of its batch
with it. A failed write is retried with backoff (0.5 s doubling
to 10 s) until it lands or ``retry_s`` has passed since its first try (then
``retries_exhausted``); a write the backend refuses outright is dropped at once (its reason,
e.g. ``http_401``). Every outcome is counted (``written``, ``retried``, ``dropped`` with the
reason) and the first failure of each kind logged once (a normal wait, such as a trace that has
not reached the backend yet, only if its retries run out).

:meth:`flush` (from any thread; ``force_flush``) waits until nothing is waiting or in flight,
but never on a backend that is down: a lane waiting out a backoff is tried again at once, and
if that try fails too the flush stops waiting for it (``False``; its results stay queued and
retried). :meth:`close` flushes within a deadline, then counts everything not written, in flight
included, as dropped (``shutdown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence

from otel_scorers.backends.base import Evaluated, ResultSink
from otel_scorers.errors import SinkError

__all__ = ["SinkQueue"]

Count = Callable[[str, str, "str | None", int], None]
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0
#: How long ``close`` waits for writes waiting out a backoff to give up and be counted.
CLOSE_WAIT_S = 2.0


class _Lane:
    """One sink's waiting results and the task that drains them."""

    def __init__(self, sink: ResultSink) -> None:
        self.sink = sink
        self.waiting: deque[tuple[Evaluated, int]] = deque()
        #: the JSON size of the waiting results
        self.bytes = 0
        #: results taken for a write that has not ended yet
        self.inflight = 0
        #: the task draining the lane: it ends when the lane is empty, and the next offer
        #: starts another (no task waits idle, so none is left pending at exit)
        self.task: asyncio.Task[None] | None = None
        #: set while a failed write waits out its backoff; setting ``wake`` ends the wait
        self.failing = False
        self.wake: asyncio.Event | None = None
        self.retry_now = False
        #: failed writes so far (a flush tells a new failure from the one it found)
        self.failures = 0


def _poke(lane: _Lane) -> None:
    """On the loop: the lane's failed write is tried again now (or at its next backoff)."""
    if lane.wake is not None:
        lane.wake.set()
    else:
        lane.retry_now = True


class SinkQueue:
    """The sinks of one processor (or command) and what is waiting for each."""

    def __init__(self, sinks: Sequence[ResultSink], *, max_items: int = 10_000,
                 max_bytes: int = 64 * 1024 * 1024, retry_s: float = 120.0,
                 count: Count | None = None,
                 log_once: Callable[[str, str], None] | None = None) -> None:
        self.sinks = tuple(sinks)
        self.max_items, self.max_bytes = max_items, max_bytes
        self.retry_s = retry_s
        self._count = count
        self._log_once = log_once
        self._reset()

    def _reset(self) -> None:
        self._lanes = {sink.name: _Lane(sink) for sink in self.sinks}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Condition()
        self._closing = False
        #: (sink, outcome, reason) -> count
        self.counts: Counter[tuple[str, str, str | None]] = Counter()

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's waiting results, tasks and lock are not ours."""
        self._reset()

    @property
    def _pending(self) -> int:
        return sum(len(lane.waiting) + lane.inflight for lane in self._lanes.values())

    # -- from the background loop --------------------------------------------------------
    def offer(self, item: Evaluated) -> None:
        """Queue ``item`` for every sink (on the background loop); never waits."""
        size = _size(item)
        with self._lock:
            if self._closing:
                for sink in self.sinks:
                    self._counted(sink.name, "dropped", "shutdown")
                return
            for lane in self._lanes.values():
                if len(lane.waiting) >= self.max_items or lane.bytes + size > self.max_bytes:
                    self._counted(lane.sink.name, "dropped", "queue_full")
                    continue
                lane.waiting.append((item, size))
                lane.bytes += size
        for lane in self._lanes.values():
            self._start(lane)

    def _start(self, lane: _Lane) -> None:
        # offers and the drain run on the same loop: a task that found its lane empty has
        # ended before the next offer can look at it
        if lane.task is None or lane.task.done():
            self._loop = asyncio.get_running_loop()
            lane.task = self._loop.create_task(self._run(lane))

    async def _run(self, lane: _Lane) -> None:
        while batch := self._take(lane):
            await self._deliver(lane, batch)

    def _take(self, lane: _Lane) -> list[Evaluated]:
        with self._lock:
            waiting = lane.waiting
            taken = [waiting.popleft() for _ in range(min(lane.sink.max_batch, len(waiting)))]
            lane.bytes -= sum(size for _, size in taken)
            lane.inflight += len(taken)
            return [item for item, _ in taken]

    async def _deliver(self, lane: _Lane, batch: list[Evaluated]) -> None:
        sink = lane.sink
        deadline = time.monotonic() + self.retry_s
        delay = FIRST_DELAY_S
        while True:
            try:
                await sink.write(batch)
                lane.failing = False
                self._done(lane, "written", None, len(batch))
                return
            except SinkError as error:
                if not error.retryable and len(batch) > 1 and not self._closing:
                    for one in batch:  # which one was refused: each on its own
                        await self._deliver(lane, [one])
                    return
                give_up = (not error.retryable or self._closing
                           or time.monotonic() + delay > deadline)
                if give_up or not error.expected:
                    self._say(sink, error, give_up)
                if give_up:
                    reason = error.reason if not error.retryable else (
                        "shutdown" if self._closing else "retries_exhausted")
                    lane.failing = False
                    self._done(lane, "dropped", reason, len(batch))
                    return
                self._counted(sink.name, "retried", error.reason, len(batch))
                if not error.expected:  # (a normal wait is waited for by a flush)
                    with self._lock:
                        lane.failing = True
                        lane.failures += 1
                        self._lock.notify_all()
            except asyncio.CancelledError:
                self._done(lane, "dropped", "shutdown", len(batch))
                raise
            except Exception:  # a sink's own bug: counted, logged once, never raised
                if self._log_once is not None:
                    self._log_once(f"sink:{sink.name}:internal",
                                   f"otel-scorers: the {sink.name} sink failed unexpectedly")
                self._done(lane, "dropped", "internal_error", len(batch))
                return
            if not lane.retry_now:  # (a flush or close asked for a try now)
                lane.wake = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lane.wake.wait(), delay)  # or woken
                lane.wake = None
            lane.retry_now = False
            if self._closing:  # closed while waiting: not tried again
                lane.failing = False
                self._done(lane, "dropped", "shutdown", len(batch))
                return
            delay = min(delay * 2, MAX_DELAY_S)

    def _say(self, sink: ResultSink, error: SinkError, give_up: bool) -> None:
        if self._log_once is None:
            return
        what = "are dropped" if give_up else "are retried"
        self._log_once(f"sink:{sink.name}:{error.reason}:{give_up}",
                       f"otel-scorers: results for {sink.name} {what}: {error} (counted in "
                       f"otel_scorers.sink.results, reason {error.reason}; logged once)")

    def _done(self, lane: _Lane, outcome: str, reason: str | None, count: int) -> None:
        with self._lock:
            self._counted(lane.sink.name, outcome, reason, count)
            lane.inflight -= count
            if not self._pending:
                self._lock.notify_all()

    def _counted(self, sink: str, outcome: str, reason: str | None, count: int = 1) -> None:
        self.counts[(sink, outcome, reason)] += count
        if self._count is not None:
            self._count(sink, outcome, reason, count)

    # -- from any thread -----------------------------------------------------------------
    def flush(self, timeout_s: float, *, patient: bool = False) -> bool:
        """Wait until every queued result is written or dropped; ``False`` on timeout, or
        when a backend that was failing fails again on the try this flush asked for (its
        results stay queued, retried; a flush never waits out a backend that is down).
        ``patient``: wait out the retries too (a batch command's end: ``rescore``)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        if patient:
            with self._lock:
                while self._pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._lock.wait(min(remaining, 0.05))
            return True
        with self._lock:
            # a lane failing now is tried again at once and let go if that fails; another
            # is let go at its second failure (its first backoff cut short)
            limit = {name: lane.failures + (1 if lane.failing else 2)
                     for name, lane in self._lanes.items()}
            poked = {name for name, lane in self._lanes.items() if lane.failing}
        self._wake(lane for lane in self._lanes.values() if lane.sink.name in poked)
        with self._lock:
            while True:
                waited = [lane for lane in self._lanes.values()
                          if lane.waiting or lane.inflight]
                if not waited:
                    return True
                if any(lane.failures >= limit[lane.sink.name] for lane in waited):
                    return False  # down: tried again at once, failed again
                again = [lane for lane in waited
                         if lane.failing and lane.sink.name not in poked]
                if again:
                    poked.update(lane.sink.name for lane in again)
                    self._lock.release()
                    try:
                        self._wake(again)
                    finally:
                        self._lock.acquire()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(min(remaining, 0.05))

    def close(self, timeout_s: float) -> None:
        """Flush within ``timeout_s``, then stop: what is left, waiting or in a write that
        is waiting out its backoff, is dropped and counted (``shutdown``). Once closed, a
        second close (the SDK's shutdown after the exit) returns at once: the writes still in
        flight had their time (said once), and the process does not wait for them again."""
        with self._lock:
            if self._closing:
                return
        self.flush(timeout_s)
        with self._lock:
            self._closing = True
            for lane in self._lanes.values():
                if lane.waiting:
                    self._counted(lane.sink.name, "dropped", "shutdown", len(lane.waiting))
                    lane.waiting.clear()
                    lane.bytes = 0
            self._lock.notify_all()
        self._wake(self._lanes.values())  # a write waiting to retry gives up now, counted
        deadline = time.monotonic() + CLOSE_WAIT_S
        with self._lock:
            while any(lane.failing and lane.inflight for lane in self._lanes.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(min(remaining, 0.05))
            late = {lane.sink.name: lane.inflight for lane in self._lanes.values()
                    if lane.inflight}
        if late and self._log_once is not None:
            for name, count in late.items():
                self._log_once(f"sink:{name}:late", f"otel-scorers: {count} result(s) for "
                               f"{name} were still being written when the time to close ran "
                               "out: not waited for (dropped, reason shutdown); check that the "
                               "backend is up, or raise OTEL_SCORERS_EXIT_TIMEOUT_S")

    def _wake(self, lanes: Iterable[_Lane]) -> None:
        """End the backoff waits of ``lanes``, or the next one (from any thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for lane in lanes:
            with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
                loop.call_soon_threadsafe(_poke, lane)

    def totals(self) -> dict[str, dict[str, int]]:
        """Per sink: ``written``, ``retried``, ``dropped`` and ``dropped:<reason>`` counts."""
        out: dict[str, dict[str, int]] = {sink.name: {} for sink in self.sinks}
        for (name, outcome, reason), count in self.counts.items():
            row = out.setdefault(name, {})
            row[outcome] = row.get(outcome, 0) + count
            if outcome == "dropped" and reason:
                row[f"dropped:{reason}"] = row.get(f"dropped:{reason}", 0) + count
        with self._lock:
            for lane in self._lanes.values():
                out[lane.sink.name]["waiting"] = len(lane.waiting)
        return out


def _size(item: Evaluated) -> int:
    """What ``item`` weighs waiting: its result's JSON size (the ids and names beside it are
    a few hundred bytes)."""
    return len(item.result.model_dump_json()) + 256
