"""Where the trace buffer keeps its traces, and how long: the entries, their bounds in number
and age, the holds of queued evaluations, and what is let go (:class:`TraceStore`, the base of
:class:`otel_scorers.capture.trace.TraceBuffer`, whose docstring says why each bound exists).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

from otel_scorers.capture.trace_entry import SPAN_OVERHEAD, Pending, TraceEntry
from otel_scorers.names import Reason

__all__ = ["LOST_KEPT", "TraceStore"]

#: Traces let go while evaluations held them, remembered for those evaluations (the newest).
LOST_KEPT = 10_000


class TraceStore:
    """Buffered traces by id, bounded in number, bytes and age; held while evaluations queued
    for them have not read them yet."""

    def __init__(self, *, max_traces: int = 2_000, max_spans_per_trace: int = 256,
                 max_bytes: int = 32 * 1024 * 1024, max_age_s: float = 120.0,
                 max_hold_s: float = 3_600.0) -> None:
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        #: how old a trace held by queued evaluations may grow before it is let go anyway
        self.max_hold_s = max_hold_s
        #: traces let go while held: trace id -> why (``expired``, ``trace_limit``)
        self._lost: OrderedDict[int, str] = OrderedDict()
        self._traces: OrderedDict[int, TraceEntry] = OrderedDict()
        #: Read-only view of the buffered trace ids (membership tests on the hot path).
        self.traces: Mapping[int, Any] = self._traces
        self._bytes = 0
        self._lock = threading.Lock()
        self.dropped: Counter[str] = Counter()
        #: Pending candidates of traces evicted or expired before they were decided.
        self._evicted: list[Pending] = []

    def __len__(self) -> int:
        return len(self._traces)

    @property
    def bytes(self) -> int:
        return self._bytes

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock (the parent's may have been held by a thread that
        does not exist here) and no content of the parent's traces."""
        self._lock = threading.Lock()
        self._traces.clear()
        self._bytes = 0
        self.dropped.clear()
        self._evicted = []
        self._lost.clear()

    def _take(self, trace_id: int, entry: TraceEntry, reason: str | None = None) -> Pending:
        pending = tuple(entry.pending)
        entry.pending = []
        entry.size -= SPAN_OVERHEAD * len(pending)
        self._bytes -= SPAN_OVERHEAD * len(pending)
        llm = frozenset(entry.llm | {span_id for span_id, own in entry.records.items() if own})
        return Pending(trace_id, pending, dict(entry.parents), llm, reason)

    def take_evicted(self) -> list[Pending]:
        """Pending candidates of traces evicted or expired since the last call."""
        with self._lock:
            evicted, self._evicted = self._evicted, []
        return evicted

    def _entry(self, trace_id: int) -> TraceEntry:
        entry = self._traces.get(trace_id)
        if entry is None:
            if len(self._traces) >= self.max_traces:
                self._evict_oldest(Reason.TRACE_LIMIT)
            entry = self._traces[trace_id] = TraceEntry(created=time.monotonic())
        return entry

    # -- holding for queued evaluations ----------------------------------------------------
    def hold(self, trace_id: int) -> None:
        r"""An evaluation that will read the trace's pieces is queued: the trace stays until it
        is :meth:`release`\ d (or ``max_hold_s``)."""
        if trace_id not in self._traces:  # nothing buffered: nothing to keep
            return
        with self._lock:
            entry = self._traces.get(trace_id)
            if entry is not None:
                entry.readers += 1

    def release(self, trace_id: int, *, root: bool = False) -> None:
        """A queued evaluation read the trace (or was dropped); ``root``: it was the trace's
        local root, so nothing else of the trace is to come. The trace goes once no other
        evaluation holds it and its root ended."""
        if trace_id not in self._traces:
            return
        with self._lock:
            entry = self._traces.get(trace_id)
            if entry is None:
                return
            entry.readers = max(0, entry.readers - 1)
            entry.closed = entry.closed or root
            if entry.closed and not entry.readers and not entry.pending:
                del self._traces[trace_id]
                self._bytes -= entry.size

    def lost(self, trace_id: int) -> str | None:
        """Why the trace was let go while evaluations held it (its runs' steps are gone), or
        ``None``."""
        return self._lost.get(trace_id) if self._lost else None

    def _note_lost(self, trace_id: int, reason: str) -> None:
        self._lost[trace_id] = reason
        while len(self._lost) > LOST_KEPT:
            self._lost.popitem(last=False)

    # -- housekeeping ----------------------------------------------------------------------
    def discard(self, trace_id: int) -> None:
        """Let go of a trace nobody will read (its root was decided); one still held by a
        queued evaluation goes when that one releases it."""
        if trace_id not in self._traces:  # nothing held: no lock taken (dropped runs)
            return
        with self._lock:
            entry = self._traces.get(trace_id)
            if entry is None:
                return
            if entry.readers:
                entry.closed = True
                return
            del self._traces[trace_id]
            if entry.pending:
                self._evicted.append(self._take(trace_id, entry, Reason.TRACE_LIMIT))
            self._bytes -= entry.size

    def clear(self, reason: str) -> list[Pending]:
        """Let go of everything (the processor stopped: no evaluation will read it again,
        and a stopped processor outlives its use, kept by the SDK's exit hook); returns the
        candidates still pending, marked with ``reason``, for their runs to be counted."""
        with self._lock:
            left = [*self._evicted, *(self._take(trace_id, entry, reason)
                                      for trace_id, entry in self._traces.items()
                                      if entry.pending)]
            self._traces.clear()
            self._evicted = []
            self._bytes = 0
            self._lost.clear()
        return left

    def sweep(self, now: float | None = None) -> int:
        """Remove entries past their age; returns how many content pieces expired unused.

        Traces whose root ended are cleaned up silently; a trace still open after
        ``max_age_s`` counts its content spans and records as dropped (``expired``). A trace
        held by queued evaluations stays until ``max_hold_s``, then goes as ``expired`` too,
        remembered for its evaluations (:meth:`lost`).
        """
        now = now if now is not None else time.monotonic()
        cutoff, held_cutoff = now - self.max_age_s, now - self.max_hold_s
        expired = 0
        with self._lock:
            for trace_id in [k for k, e in self._traces.items() if e.created <= cutoff
                             and (not e.readers or e.created <= held_cutoff)]:
                entry = self._traces.pop(trace_id)
                if entry.pending:
                    self._evicted.append(self._take(trace_id, entry, Reason.TRACE_LIMIT))
                self._bytes -= entry.size
                if entry.readers:
                    self._note_lost(trace_id, Reason.EXPIRED)
                if not entry.closed or entry.readers:
                    expired += len(entry.spans) + entry.record_count
        if expired:
            self.dropped[Reason.EXPIRED] += expired
        return expired

    def _evict_oldest(self, reason: str) -> None:
        """The oldest trace no queued evaluation holds goes (the oldest of all when every one
        is held: remembered for its evaluations)."""
        trace_id = next((key for key, held in self._traces.items() if not held.readers),
                        next(iter(self._traces)))
        entry = self._traces.pop(trace_id)
        if entry.readers:
            self._note_lost(trace_id, reason)
        if entry.pending:
            self._evicted.append(self._take(trace_id, entry, reason))
        self._bytes -= entry.size
        self.dropped[reason] += max(1, len(entry.spans) + entry.record_count)
