"""Results on their way to the sinks: bounded, batched, retried, counted, never on the
application's hot path.

:meth:`SinkQueue.offer` is called on the library's background loop when an evaluation is
emitted; it never waits: past ``max_items`` waiting per sink a result is dropped and counted
(``queue_full``). One task per queue drains each sink in batches of the sink's ``max_batch``; a
failed write is retried with backoff (0.5 s doubling to 10 s) until it lands or ``retry_s`` has
passed since its first try (then ``retries_exhausted``); a write the backend refuses outright is
dropped at once (its reason, e.g. ``http_401``). Every outcome is counted (``written``,
``retried``, ``dropped`` with the reason) and the first failure of each kind logged once.
:meth:`flush` waits (from any thread) until nothing is waiting or in flight; :meth:`close`
flushes within a deadline and counts what is left as dropped (``shutdown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from otel_scorers import background_loop
from otel_scorers.sinks.base import Evaluated, ResultSink, SinkError

__all__ = ["SinkQueue"]

Count = Callable[[str, str, "str | None", int], None]
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0


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
        self._waiting: dict[str, deque[Evaluated]] = {s.name: deque() for s in self.sinks}
        self._pending = 0
        self._lock = threading.Condition()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        #: (sink, outcome, reason) -> count
        self.counts: Counter[tuple[str, str, str | None]] = Counter()

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's waiting results, task and lock are not ours."""
        self._lock = threading.Condition()
        self._waiting = {s.name: deque() for s in self.sinks}
        self._pending = 0
        self._wake = None
        self._task = None
        self.counts = Counter()

    # -- from the background loop --------------------------------------------------------
    def offer(self, item: Evaluated) -> None:
        """Queue ``item`` for every sink (on the background loop); never waits."""
        with self._lock:
            if self._closing:
                for sink in self.sinks:
                    self._counted(sink.name, "dropped", "shutdown")
                return
            for sink in self.sinks:
                waiting = self._waiting[sink.name]
                if len(waiting) >= self.max_items:
                    self._counted(sink.name, "dropped", "queue_full")
                    continue
                waiting.append(item)
                self._pending += 1
        self._start()
        assert self._wake is not None
        self._wake.set()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        # No ``async with`` around the loop: a task still waiting when the interpreter (or a
        # forked child) drops it must not have to await anything while it is closed.
        import aiohttp

        wake = self._wake
        assert wake is not None
        session = aiohttp.ClientSession()
        try:
            while True:
                await wake.wait()
                wake.clear()
                for sink in self.sinks:
                    while batch := self._take(sink):
                        await self._deliver(session, sink, batch)
                with self._lock:
                    if self._closing and not self._pending:
                        break
        except asyncio.CancelledError:
            await session.close()
            raise
        await session.close()

    def _take(self, sink: ResultSink) -> list[Evaluated]:
        with self._lock:
            waiting = self._waiting[sink.name]
            return [waiting.popleft() for _ in range(min(sink.max_batch, len(waiting)))]

    async def _deliver(self, session: Any, sink: ResultSink, batch: list[Evaluated]) -> None:
        deadline = time.monotonic() + self.retry_s
        delay = FIRST_DELAY_S
        while True:
            try:
                await sink.write(session, batch)
                self._done(sink.name, "written", None, len(batch))
                return
            except SinkError as error:
                give_up = (not error.retryable or self._closing
                           or time.monotonic() + delay > deadline)
                self._say(sink, error, give_up)
                if give_up:
                    reason = error.reason if not error.retryable else (
                        "shutdown" if self._closing else "retries_exhausted")
                    self._done(sink.name, "dropped", reason, len(batch))
                    return
                self._counted(sink.name, "retried", error.reason, len(batch))
            except Exception:  # a sink's own bug: counted, logged once, never raised
                if self._log_once is not None:
                    self._log_once(f"sink:{sink.name}:internal",
                                   f"otel-scorers: the {sink.name} sink failed unexpectedly")
                self._done(sink.name, "dropped", "internal_error", len(batch))
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

    def _done(self, sink: str, outcome: str, reason: str | None, count: int) -> None:
        with self._lock:
            self._counted(sink, outcome, reason, count)
            self._pending -= count
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
            left = {name: len(items) for name, items in self._waiting.items()}
            for items in self._waiting.values():
                items.clear()
            for name, count in left.items():
                if count:
                    self._counted(name, "dropped", "shutdown", count)
            self._pending -= sum(left.values())
        if self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone at exit
                background_loop.call_soon(self._wake.set)

    def totals(self) -> dict[str, dict[str, int]]:
        """Per sink: ``written``, ``retried``, ``dropped`` and ``dropped:<reason>`` counts."""
        out: dict[str, dict[str, int]] = {sink.name: {} for sink in self.sinks}
        for (name, outcome, reason), count in self.counts.items():
            row = out.setdefault(name, {})
            row[outcome] = row.get(outcome, 0) + count
            if outcome == "dropped" and reason:
                row[f"dropped:{reason}"] = row.get(f"dropped:{reason}", 0) + count
        with self._lock:
            for sink in self.sinks:
                out[sink.name]["waiting"] = len(self._waiting[sink.name])
        return out
