"""A bounded per-trace buffer of content-bearing LLM spans, for agents whose own span is empty.

Some instrumentations (OpenInference's OpenAI Agents SDK, for one) put the conversation only on
the LLM spans under the agent span. Children end before their parent, so the processor keeps
those LLM spans here and, when the agent span ends, assembles the run from its descendants.

Bounded three ways, each drop counted: number of traces (oldest evicted), content spans per
trace, total bytes of content; entries also expire after ``max_age_s``. Parent links of every
span in a buffered trace are kept (a few bytes each) so descendants can be found through
intermediate spans (chains, tools) that carry no content themselves.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.conventions import CONTENT_KEYS
from otel_scorers.emit.names import Reason

__all__ = ["CONTENT_KEY_SET", "TraceBuffer"]

_SPAN_OVERHEAD = 512
CONTENT_KEY_SET = frozenset(CONTENT_KEYS)
#: Seconds a trace stays buffered after its (unselected) root span ended.
ROOT_GRACE_S = 30.0


@dataclass
class _Trace:
    created: float
    spans: list[ReadableSpan] = field(default_factory=list)
    parents: dict[int, int | None] = field(default_factory=dict)
    size: int = 0
    closed: bool = False


def _content_size(span: ReadableSpan) -> int:
    attrs = span.attributes or {}
    size = _SPAN_OVERHEAD
    for key, value in attrs.items():
        if isinstance(value, str):
            size += len(value)
        elif key.startswith(("llm.", "gen_ai.")):
            size += 64
    return size


class TraceBuffer:
    """Content spans and parent links per trace, bounded in traces, spans, bytes and age."""

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

    def observe(self, span: ReadableSpan, attrs: Mapping[str, Any] | None,
                *, keep_content: bool = True) -> None:
        """Record ``span``'s content (when it has some) and its parent link (when its trace is
        buffered). Selected runs pass ``keep_content=False``: their own content is read directly.

        Called on the hot path for every span: a few dict lookups unless the span has content.
        """
        context = span.context
        if context is None:
            return
        trace_id = context.trace_id
        has_content = keep_content and attrs is not None and not CONTENT_KEY_SET.isdisjoint(attrs)
        if not has_content and trace_id not in self._traces:
            return
        parent = span.parent.span_id if span.parent is not None else None
        with self._lock:
            entry = self._traces.get(trace_id)
            if entry is None:
                if len(self._traces) >= self.max_traces:
                    self._evict_oldest(Reason.TRACE_LIMIT)
                entry = self._traces[trace_id] = _Trace(created=time.monotonic())
            if len(entry.parents) < self.max_spans_per_trace * 8:
                entry.parents[context.span_id] = parent
            if parent is None and keep_content:
                # the trace's root ended and was not itself selected: every agent run of the
                # trace has been queued; keep the entry only a little longer for their workers
                entry.created = min(entry.created, time.monotonic() - self.max_age_s
                                    + ROOT_GRACE_S)
                entry.closed = True
            if not has_content:
                return
            if len(entry.spans) >= self.max_spans_per_trace:
                self.dropped[Reason.SPAN_LIMIT] += 1
                return
            size = _content_size(span)
            if self._bytes + size > self.max_bytes:
                self.dropped[Reason.BYTE_LIMIT] += 1
                return
            entry.spans.append(span)
            entry.size += size
            self._bytes += size

    def descendants(self, agent: ReadableSpan) -> list[ReadableSpan]:
        """Buffered content spans under ``agent`` (through any chain of recorded parents)."""
        if agent.context is None:
            return []
        with self._lock:
            entry = self._traces.get(agent.context.trace_id)
            if entry is None:
                return []
            spans = list(entry.spans)
            parents = dict(entry.parents)
        root = agent.context.span_id
        return [s for s in spans if s.context is not None
                and descends_from(s.context.span_id, root, parents)]

    def discard(self, trace_id: int) -> None:
        with self._lock:
            entry = self._traces.pop(trace_id, None)
            if entry is not None:
                self._bytes -= entry.size

    def sweep(self, now: float | None = None) -> int:
        """Remove entries past their age; returns how many content spans expired unused.

        Traces whose root ended are cleaned up silently; a trace still open after
        ``max_age_s`` counts its content spans as dropped (``expired``).
        """
        cutoff = (now if now is not None else time.monotonic()) - self.max_age_s
        expired = 0
        with self._lock:
            for trace_id in [k for k, e in self._traces.items() if e.created <= cutoff]:
                entry = self._traces.pop(trace_id)
                self._bytes -= entry.size
                if not entry.closed:
                    expired += len(entry.spans)
        if expired:
            self.dropped[Reason.EXPIRED] += expired
        return expired

    def _evict_oldest(self, reason: str) -> None:
        _, entry = self._traces.popitem(last=False)
        self._bytes -= entry.size
        self.dropped[reason] += max(1, len(entry.spans))


def descends_from(span_id: int, root: int, parents: dict[int, int | None]) -> bool:
    """Whether ``span_id`` is under ``root`` through ``parents`` (child -> parent span ids)."""
    current: int | None = parents.get(span_id)
    for _ in range(64):
        if current is None:
            return False
        if current == root:
            return True
        current = parents.get(current)
    return False
