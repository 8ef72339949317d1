"""A bounded per-trace buffer of conversation content, for agent runs whose own span is empty.

Some instrumentations put the conversation only on the LLM spans under the agent span
(OpenInference's OpenAI Agents SDK), or only on log records of those LLM calls (the OTel GenAI
instrumentations in ``EVENT_ONLY`` mode). Children end before their parent, so the processor
keeps that content here and, when the agent span ends, assembles the run from the pieces under
it (:meth:`TraceBuffer.pieces_under`).

One interaction, one evaluation: a piece belongs to the innermost selected agent span above
it. A run assembled for an outer agent span (a workflow root, a supervisor) leaves out the
pieces of the agent spans nested in it, which are evaluated on their own.

Records can come after their span (a gateway receives ``/v1/logs`` and ``/v1/traces``
separately); the span, having carried no content, left no parent link then. Such a record is
placed by time: it belongs to the innermost selected agent span of its trace whose lifetime
covers the record's timestamp (both clocks are the application's).

Bounded four ways, each drop counted: number of traces (oldest evicted), content spans and
records per trace, total bytes of content (every value kind counted: strings, arrays,
structured values), and age (``max_age_s``). Parent links of every span in a buffered trace are
kept (a few bytes each) so descendants are found through intermediate spans (chains, tools)
that carry no content themselves.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.conventions import CONTENT_KEYS, value_size
from otel_scorers.capture.logs import RecordContent
from otel_scorers.capture.pieces import Piece, pieces_under
from otel_scorers.emit.names import Reason

__all__ = ["CONTENT_KEY_SET", "TraceBuffer"]

SPAN_OVERHEAD = 512
CONTENT_KEY_SET = frozenset(CONTENT_KEYS)
#: Seconds a trace stays buffered after its (unselected) root span ended.
ROOT_GRACE_S = 30.0
#: Parent links kept per trace, per content span allowed (chains and tools between them).
LINKS_PER_SPAN = 8


def content_size(attrs: Mapping[str, Any]) -> int:
    """Bytes a content span holds in the buffer: every attribute value, of any kind."""
    return SPAN_OVERHEAD + sum(len(key) + value_size(value) for key, value in attrs.items())


@dataclass
class _Trace:
    created: float
    spans: list[tuple[ReadableSpan, Mapping[str, Any]]] = field(default_factory=list)
    records: dict[int, list[RecordContent]] = field(default_factory=dict)
    record_count: int = 0
    parents: dict[int, int | None] = field(default_factory=dict)
    agents: dict[int, tuple[int, int]] = field(default_factory=dict)  # span id -> start, end
    size: int = 0
    closed: bool = False


class TraceBuffer:
    """Content spans, content log records, parent links and agent spans per trace, bounded."""

    def __init__(self, *, max_traces: int = 2_000, max_spans_per_trace: int = 64,
                 max_bytes: int = 32 * 1024 * 1024, max_age_s: float = 120.0) -> None:
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        #: Read-only view of the buffered trace ids (membership tests on the hot path).
        self.traces: Mapping[int, Any] = self._traces
        self._bytes = 0
        self._lock = threading.Lock()
        self.dropped: Counter[str] = Counter()

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

    # -- recording (hot path) --------------------------------------------------------------
    def observe(self, span: ReadableSpan, attrs: Mapping[str, Any] | None,
                *, keep_content: bool = True, agent: bool = False, create: bool = False
                ) -> None:
        """Record ``span``'s content (when it has some and ``keep_content``), its parent link
        (when its trace is buffered, or ``create``) and whether it is a selected agent span.
        Selected runs pass ``keep_content=False``: their own content is read directly; with a
        log side, which may bring their content later, they pass ``create`` too.

        Called on the hot path: a few dict lookups unless the span has content.
        """
        context = span.context
        if context is None:
            return
        trace_id = context.trace_id
        has_content = keep_content and attrs is not None and not CONTENT_KEY_SET.isdisjoint(attrs)
        if not has_content and not create and trace_id not in self._traces:
            return
        parent = span.parent.span_id if span.parent is not None else None
        with self._lock:
            entry = self._entry(trace_id)
            if len(entry.parents) < self.max_spans_per_trace * LINKS_PER_SPAN:
                entry.parents[context.span_id] = parent
            if agent:
                entry.agents[context.span_id] = (span.start_time or 0, span.end_time or 0)
            if parent is None and not agent:
                # the trace's root ended and was not itself selected: every agent run of the
                # trace has been queued; keep the entry only a little longer for their workers
                entry.created = min(entry.created, time.monotonic() - self.max_age_s
                                    + ROOT_GRACE_S)
                entry.closed = True
            if has_content and attrs is not None:
                self._add(entry, content_size(attrs), lambda: entry.spans.append((span, attrs)))

    def observe_record(self, trace_id: int, span_id: int, content: RecordContent) -> None:
        """Record the content of a log record emitted for span ``span_id`` of ``trace_id``."""
        with self._lock:
            entry = self._entry(trace_id)

            def keep() -> None:
                entry.records.setdefault(span_id, []).append(content)
                entry.record_count += 1
            self._add(entry, SPAN_OVERHEAD + content.size, keep,
                      count=entry.record_count)

    def _entry(self, trace_id: int) -> _Trace:
        entry = self._traces.get(trace_id)
        if entry is None:
            if len(self._traces) >= self.max_traces:
                self._evict_oldest(Reason.TRACE_LIMIT)
            entry = self._traces[trace_id] = _Trace(created=time.monotonic())
        return entry

    def _add(self, entry: _Trace, size: int, keep: Any, *, count: int | None = None) -> None:
        held = len(entry.spans) if count is None else count
        if held >= self.max_spans_per_trace:
            self.dropped[Reason.SPAN_LIMIT] += 1
            return
        if self._bytes + size > self.max_bytes:
            self.dropped[Reason.BYTE_LIMIT] += 1
            return
        keep()
        entry.size += size
        self._bytes += size

    # -- reading (worker) ------------------------------------------------------------------
    def pieces_under(self, agent: ReadableSpan) -> tuple[list[Piece], int]:
        """The content under ``agent`` that belongs to it (buffered spans and records of its
        descendants), and how many pieces were left out as a nested agent span's."""
        if agent.context is None:
            return [], 0
        with self._lock:
            entry = self._traces.get(agent.context.trace_id)
            if entry is None:
                return [], 0
            spans = list(entry.spans)
            records = {key: list(value) for key, value in entry.records.items()}
            parents = dict(entry.parents)
            agents = dict(entry.agents)
        return pieces_under(agent.context.span_id, spans, records, parents, agents)

    def records_of(self, span: ReadableSpan) -> tuple[RecordContent, ...]:
        """The content records emitted for ``span`` itself."""
        if span.context is None:
            return ()
        with self._lock:
            entry = self._traces.get(span.context.trace_id)
            if entry is None:
                return ()
            return tuple(entry.records.get(span.context.span_id, ()))

    # -- housekeeping ----------------------------------------------------------------------
    def discard(self, trace_id: int) -> None:
        with self._lock:
            entry = self._traces.pop(trace_id, None)
            if entry is not None:
                self._bytes -= entry.size

    def sweep(self, now: float | None = None) -> int:
        """Remove entries past their age; returns how many content pieces expired unused.

        Traces whose root ended are cleaned up silently; a trace still open after
        ``max_age_s`` counts its content spans and records as dropped (``expired``).
        """
        cutoff = (now if now is not None else time.monotonic()) - self.max_age_s
        expired = 0
        with self._lock:
            for trace_id in [k for k, e in self._traces.items() if e.created <= cutoff]:
                entry = self._traces.pop(trace_id)
                self._bytes -= entry.size
                if not entry.closed:
                    expired += len(entry.spans) + entry.record_count
        if expired:
            self.dropped[Reason.EXPIRED] += expired
        return expired

    def _evict_oldest(self, reason: str) -> None:
        _, entry = self._traces.popitem(last=False)
        self._bytes -= entry.size
        self.dropped[reason] += max(1, len(entry.spans) + entry.record_count)
