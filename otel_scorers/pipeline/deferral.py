"""Runs waiting for the log records that carry their content.

In one process the GenAI instrumentations emit a call's log record before its span ends, so
the content is there when the agent span is evaluated. Across processes it need not be: a
gateway receives ``/v1/logs`` and ``/v1/traces`` in separate requests, in either order. A
selected span found without content is therefore set aside for up to ``log_wait_s`` (when a log
side is attached), and comes back as soon as a content record for its trace arrives, or when
the wait is over; then it is decided for good. The set is bounded (``max_jobs``): past it, a
run is decided at once, never held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from otel_scorers.pipeline.evaluation import Job

__all__ = ["Deferred"]


class Deferred:
    """Jobs waiting for log records, by trace id, with their deadlines."""

    def __init__(self, wait_s: float, max_jobs: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.wait_s = wait_s
        self.max_jobs = max_jobs
        self._clock = clock
        self._jobs: dict[int, list[tuple[float, Job]]] = {}
        self._count = 0
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock; the parent's waiting jobs are not ours."""
        self._lock = threading.Lock()
        self._jobs = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, job: Job) -> bool:
        """Set ``job`` aside; ``False`` when it must be decided now (no wait configured, its
        second time round, no trace id, or the set is full)."""
        context = job.span.context
        if self.wait_s <= 0 or job.attempt > 0 or context is None:
            return False
        with self._lock:
            if self._count >= self.max_jobs:
                return False
            deadline = self._clock() + self.wait_s
            self._jobs.setdefault(context.trace_id, []).append((deadline, job))
            self._count += 1
        return True

    def arrived(self, trace_id: int) -> None:
        """A content record for ``trace_id`` came in: its waiting jobs are due now."""
        if trace_id not in self._jobs:  # the common case, without the lock
            return
        with self._lock:
            waiting = self._jobs.get(trace_id)
            if waiting:
                self._jobs[trace_id] = [(0.0, job) for _, job in waiting]

    def due(self) -> list[Job]:
        """Take the jobs whose wait is over (or whose records came)."""
        now = self._clock()
        out: list[Job] = []
        with self._lock:
            for trace_id in list(self._jobs):
                waiting = self._jobs[trace_id]
                ready = [job for deadline, job in waiting if deadline <= now]
                if not ready:
                    continue
                rest = [(deadline, job) for deadline, job in waiting if deadline > now]
                if rest:
                    self._jobs[trace_id] = rest
                else:
                    del self._jobs[trace_id]
                out.extend(ready)
            self._count -= len(out)
        return out

    def take_all(self) -> list[Job]:
        """Take every waiting job (flush, shutdown: in one process, records came already)."""
        with self._lock:
            out = [job for waiting in self._jobs.values() for _, job in waiting]
            self._jobs.clear()
            self._count = 0
        return out
