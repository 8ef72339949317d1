"""Results on their way to the backends: bounded, batched, retried, counted, never on the
application's hot path, and each backend on its own.

:meth:`SinkQueue.offer` is called on the library's background loop when an evaluation is
emitted; it never waits: past ``max_items`` waiting for a sink a result is dropped for that
sink and counted (``queue_full``). Each sink has a lane of its own (its waiting results and one
task draining them in batches of the sink's ``max_batch``), so a slow or hung backend holds
only its own results, never another's. A failed write is retried with backoff (0.5 s doubling
to 10 s) until it lands or ``retry_s`` has passed since its first try (then
``retries_exhausted``); a write the backend refuses outright is dropped at once (its reason,
e.g. ``http_401``). Every outcome is counted (``written``, ``retried``, ``dropped`` with the
reason) and the first failure of each kind logged once. :meth:`flush` waits (from any thread)
until nothing is waiting or in flight; :meth:`close` flushes within a deadline and counts what
is left as dropped (``shutdown``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence

from otel_scorers.backends.base import Evaluated, ResultSink
from otel_scorers.errors import SinkError

__all__ = ["SinkQueue"]

Count = Callable[[str, str, "str | None", int], None]
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0


class _Lane:
    """One sink's waiting results and the task that drains them."""

    def __init__(self, sink: ResultSink) -> None:
        self.sink = sink
        self.waiting: deque[Evaluated] = deque()
        #: results taken for a write that has not ended yet
        self.inflight = 0
        #: the task draining the lane: it ends when the lane is empty, and the next offer
        #: starts another (no task waits idle, so none is left pending at exit)
        self.task: asyncio.Task[None] | None = None


class SinkQueue:
    """The sinks of one processor (or command) and what is waiting for each."""

    def __init__(self, sinks: Sequence[ResultSink], *, max_items: int = 10_000,
                 retry_s: float = 120.0, count: Count | None = None,
                 log_once: Callable[[str, str], None] | None = None) -> None:
        self.sinks = tuple(sinks)
        self.max_items = max_items
        self.retry_s = retry_s
        self._count = count
        self._log_once = log_once
        self._reset()

    def _reset(self) -> None:
        self._lanes = {sink.name: _Lane(sink) for sink in self.sinks}
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
        with self._lock:
            if self._closing:
                for sink in self.sinks:
                    self._counted(sink.name, "dropped", "shutdown")
                return
            for lane in self._lanes.values():
                if len(lane.waiting) >= self.max_items:
                    self._counted(lane.sink.name, "dropped", "queue_full")
                    continue
                lane.waiting.append(item)
        for lane in self._lanes.values():
            self._start(lane)

    def _start(self, lane: _Lane) -> None:
        # offers and the drain run on the same loop: a task that found its lane empty has
        # ended before the next offer can look at it
        if lane.task is None or lane.task.done():
            lane.task = asyncio.get_running_loop().create_task(self._run(lane))

    async def _run(self, lane: _Lane) -> None:
        while batch := self._take(lane):
            await self._deliver(lane, batch)

    def _take(self, lane: _Lane) -> list[Evaluated]:
        with self._lock:
            waiting = lane.waiting
            batch = [waiting.popleft() for _ in range(min(lane.sink.max_batch, len(waiting)))]
            lane.inflight += len(batch)
            return batch

    async def _deliver(self, lane: _Lane, batch: list[Evaluated]) -> None:
        sink = lane.sink
        deadline = time.monotonic() + self.retry_s
        delay = FIRST_DELAY_S
        while True:
            try:
                await sink.write(batch)
                self._done(lane, "written", None, len(batch))
                return
            except SinkError as error:
                give_up = (not error.retryable or self._closing
                           or time.monotonic() + delay > deadline)
                self._say(sink, error, give_up)
                if give_up:
                    reason = error.reason if not error.retryable else (
                        "shutdown" if self._closing else "retries_exhausted")
                    self._done(lane, "dropped", reason, len(batch))
                    return
                self._counted(sink.name, "retried", error.reason, len(batch))
            except asyncio.CancelledError:
                self._done(lane, "dropped", "shutdown", len(batch))
                raise
            except Exception:  # a sink's own bug: counted, logged once, never raised
                if self._log_once is not None:
                    self._log_once(f"sink:{sink.name}:internal",
                                   f"otel-scorers: the {sink.name} sink failed unexpectedly")
                self._done(lane, "dropped", "internal_error", len(batch))
                return
            await asyncio.sleep(delay)
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
    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued result is written or dropped; ``False`` on timeout."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._lock:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(min(remaining, 0.05))
        return True

    def close(self, timeout_s: float) -> None:
        """Flush within ``timeout_s``, then stop: what is left is dropped (``shutdown``)."""
        self.flush(timeout_s)
        with self._lock:
            self._closing = True
            for lane in self._lanes.values():
                if lane.waiting:
                    self._counted(lane.sink.name, "dropped", "shutdown", len(lane.waiting))
                    lane.waiting.clear()
            self._lock.notify_all()

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
