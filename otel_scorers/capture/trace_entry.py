"""One buffered trace's entry and what leaves the buffer with it (see :mod:`.trace`).

The entry holds a trace's content spans, records, parent links and agent spans with the counts
of what was cut; :class:`Pending` is what resolving a trace's candidates needs once it leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.conventions import CONTENT_KEYS, value_size
from otel_scorers.capture.interactions import Candidate
from otel_scorers.capture.kinds import LLM, span_kind
from otel_scorers.capture.logs import RecordContent
from otel_scorers.capture.steps import step_of_span
from otel_scorers.scorers.steps import StepCounts

__all__ = ["CONTENT_KEY_SET", "SPAN_OVERHEAD", "Pending", "TraceEntry", "content_size",
           "llm_content", "unplaced"]

#: Bytes a buffered span or record is counted for beyond its content.
SPAN_OVERHEAD = 512
CONTENT_KEY_SET = frozenset(CONTENT_KEYS)


def llm_content(attrs: Mapping[str, Any]) -> bool:
    """A kept span's content is an LLM call's (its kind, or content attributes)."""
    return span_kind(attrs) in (LLM, None) or not CONTENT_KEY_SET.isdisjoint(attrs)


def content_size(attrs: Mapping[str, Any]) -> int:
    """Bytes a content span holds in the buffer: every attribute value, of any kind."""
    return SPAN_OVERHEAD + sum(len(key) + value_size(value) for key, value in attrs.items())


@dataclass
class TraceEntry:
    """One buffered trace: its kept pieces and records, links, agent spans and cut counts."""

    created: float
    touched: float = 0.0
    spans: list[tuple[ReadableSpan, Mapping[str, Any]]] = field(default_factory=list)
    records: dict[int, list[RecordContent]] = field(default_factory=dict)
    record_count: int = 0
    parents: dict[int, int | None] = field(default_factory=dict)
    agents: dict[int, tuple[int, int]] = field(default_factory=dict)  # span id -> start, end
    #: the agent spans' attributes (the same mappings the candidates hold): their names
    agent_attrs: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    pending: list[Candidate] = field(default_factory=list)
    llm: set[int] = field(default_factory=set)  # span ids of LLM calls and content
    size: int = 0
    closed: bool = False
    #: the steps of the pieces let go past the span bound (the middle of a long run) or
    #: refused for the byte budget
    cut: StepCounts | None = None
    #: spans of the trace whose parent link was not kept (past the links bound)
    unlinked: int = 0
    #: pieces whose own link was kept past the links bound (let go with their piece)
    own_links: set[int] = field(default_factory=set)
    #: evaluations queued that will read this trace's pieces (:meth:`TraceBuffer.hold`)
    readers: int = 0

    def count_cut(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        """``span`` is left out: counted as the step it was, if it was one."""
        step = step_of_span(span, attrs)
        if step is not None:
            counted = StepCounts.of((step,))
            self.cut = counted if self.cut is None else self.cut.plus(counted)


def unplaced(span_id: int, parents: Mapping[int, int | None], under: int) -> bool:
    """Whether the walk up from ``span_id`` ends at a span whose link was not kept (not at a
    root, nor at the run's span ``under``: such a piece may belong to any run of the trace)."""
    current: int | None = span_id
    for _ in range(64):
        if current is None or current == under:
            return False
        if current not in parents:
            return True
        current = parents[current]
    return True


@dataclass(frozen=True)
class Pending:
    """A trace's pending candidates taken for resolution, with what resolving them needs."""

    trace_id: int
    candidates: tuple[Candidate, ...]
    parents: Mapping[int, int | None]
    llm_spans: frozenset[int]
    #: why the trace left the buffer undecided (evicted, expired), else ``None``
    reason: str | None = None
