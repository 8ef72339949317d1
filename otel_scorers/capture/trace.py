"""A bounded per-trace buffer of what an interaction is made of, until it can be judged.

Some instrumentations put the conversation only on the LLM spans under the agent span
(OpenInference's OpenAI Agents SDK), or only on log records of those LLM calls (the OTel GenAI
instrumentations in ``EVENT_ONLY`` mode), and every agent's steps (tool calls, retrievals) are
spans of their own. Children end before their parent, so the processor keeps these *pieces*
here and, when the interaction is judged, assembles the run from the pieces under it
(:meth:`TraceBuffer.pieces_under`).

One interaction, one evaluation: the spans that may be an interaction (agent runs, workflows,
graph roots) wait here as *pending candidates* until the trace's local root ends (or the trace
goes idle), when :func:`otel_scorers.capture.interactions.resolve` tells the topmost ones apart
(:meth:`TraceBuffer.take_pending`). With per-agent evaluation, a piece belongs to the innermost
selected agent span above it instead.

Records can come after their span (a gateway receives ``/v1/logs`` and ``/v1/traces``
separately); the span, having carried no content, left no parent link then. Such a record is
placed by time: it belongs to the innermost selected agent span of its trace whose lifetime
covers the record's timestamp (both clocks are the application's).

Bounded four ways, each drop counted: number of traces (oldest evicted), pieces and records
per trace, total bytes of content (every value kind counted: strings, arrays, structured
values), and age (``max_age_s``). A trace whose evaluations are queued is *held*
(:meth:`TraceBuffer.hold`): the steps are read when an evaluation starts, which under a slow
judge is minutes after the run ended, so a held trace outlives ``max_age_s`` (up to
``max_hold_s``) and is evicted only when every other is held too; one let go while held is
remembered (:meth:`TraceBuffer.lost`), so its run is counted as dropped, never judged as a run
without steps. Parent links of every span in a buffered trace are kept (a
few bytes each, at most ``LINKS_PER_SPAN`` per piece allowed) so descendants are found through
intermediate spans that carry nothing themselves. Pending candidates of an evicted or expired
trace are never lost silently: they are handed back (:meth:`TraceBuffer.take_evicted`) to be
decided and their spans passed on.

No step is lost without a count: a piece let go past the span bound, or refused for the byte
budget, is counted as the step it was (:meth:`TraceBuffer.cut_of`); a piece kept past the
links bound keeps its own parent link (so a forbidden call after thousands of others is still
placed under its agent), and a piece that cannot be placed because a link above it was not
kept counts for every interaction of its trace (a check may then fail on a sibling's step: it
never passes past one). Each of these makes the run's steps incomplete (``steps_dropped``),
so a check that needs the steps themselves is not decided, never passed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.interactions import Candidate
from otel_scorers.capture.kinds import AGENT, LLM
from otel_scorers.capture.logs import RecordContent
from otel_scorers.capture.pieces import Piece, pieces_under
from otel_scorers.capture.steps import step_of_span
from otel_scorers.capture.trace_entry import (
    CONTENT_KEY_SET,
    SPAN_OVERHEAD,
    Pending,
    TraceEntry,
    content_size,
    llm_content,
    unplaced,
)
from otel_scorers.capture.trace_store import TraceStore
from otel_scorers.names import Reason
from otel_scorers.scorers.steps import StepCounts

__all__ = ["CONTENT_KEY_SET", "Pending", "TraceBuffer"]

#: Seconds a trace stays buffered after its (unselected) root span ended.
ROOT_GRACE_S = 30.0
#: Parent links kept per trace, per content span allowed (chains and tools between them).
LINKS_PER_SPAN = 8


class TraceBuffer(TraceStore):
    """Content spans, content log records, parent links and agent spans per trace, bounded."""

    # -- recording (hot path) --------------------------------------------------------------
    def observe(self, span: ReadableSpan, attrs: Mapping[str, Any] | None,
                *, keep_content: bool = True, agent: bool = False, create: bool = False,
                piece: bool = False, llm: bool = False) -> None:
        """Record ``span`` as a piece (when it has content and ``keep_content``, or ``piece``:
        a step or an LLM call), its parent link (when its trace is buffered, or ``create``) and
        whether it is a selected agent span (its lifetime places records that come without a
        parent link). Per-agent runs pass ``keep_content=False``: their own content is read
        directly; with a log side, which may bring their content later, they pass ``create``
        too. ``llm`` marks an LLM call that is no piece (no content, no steps kept): it still
        makes the chain above it an interaction.
        """
        context = span.context
        if context is None:
            return
        trace_id = context.trace_id
        has_content = attrs is not None and (piece or (
            keep_content and not CONTENT_KEY_SET.isdisjoint(attrs)))
        if not has_content and not create and not llm and trace_id not in self._traces:
            return
        parent = span.parent.span_id if span.parent is not None else None
        with self._lock:
            entry = self._entry(trace_id)
            entry.touched = time.monotonic()
            linked = len(entry.parents) < self.max_spans_per_trace * LINKS_PER_SPAN
            if linked:
                entry.parents[context.span_id] = parent
            elif not has_content:
                entry.unlinked += 1
            if agent:
                entry.agents[context.span_id] = (span.start_time or 0, span.end_time or 0)
                if attrs is not None:
                    entry.agent_attrs[context.span_id] = attrs
            if parent is None and not agent:
                # the trace's root ended and was not itself selected: every agent run of the
                # trace has been queued; keep the entry only a little longer for their workers
                entry.created = min(entry.created, time.monotonic() - self.max_age_s
                                    + ROOT_GRACE_S)
                entry.closed = True
            if has_content and attrs is not None:
                kept = self._add(entry, content_size(attrs),
                                 lambda: self._keep(entry, span, attrs), make_room=True)
                if not kept:  # refused for the byte budget: counted as the step it was
                    entry.count_cut(span, attrs)
                if not linked:
                    if kept:  # a kept piece keeps its own link, past the bound
                        entry.parents[context.span_id] = parent
                        entry.own_links.add(context.span_id)
                    else:
                        entry.unlinked += 1
            elif llm:
                entry.llm.add(context.span_id)

    @staticmethod
    def _keep(entry: TraceEntry, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        entry.spans.append((span, attrs))
        if span.context is not None and llm_content(attrs):
            entry.llm.add(span.context.span_id)

    def add_candidate(self, candidate: Candidate) -> bool:
        """A span that may be an interaction: pending until its trace is resolved. An agent
        span's content counts as a piece of whatever interaction holds it. ``False`` (counted)
        when its trace holds ``max_spans_per_trace`` candidates already, or the byte budget is
        spent: the caller passes the span on undecided."""
        span = candidate.span
        context = span.context
        if context is None:
            return False
        with self._lock:
            entry = self._entry(context.trace_id)
            entry.touched = time.monotonic()
            if len(entry.pending) >= self.max_spans_per_trace:
                self.dropped[Reason.SPAN_LIMIT] += 1
                entry.unlinked += 1  # (the pieces under it cannot be placed)
                return False
            if self._bytes + SPAN_OVERHEAD > self.max_bytes:
                self.dropped[Reason.BYTE_LIMIT] += 1
                entry.unlinked += 1
                return False
            entry.parents[context.span_id] = span.parent.span_id if span.parent else None
            entry.agents[context.span_id] = (span.start_time or 0, span.end_time or 0)
            if candidate.kind == AGENT:
                entry.agent_attrs[context.span_id] = candidate.attributes
            entry.pending.append(candidate)
            entry.size += SPAN_OVERHEAD
            self._bytes += SPAN_OVERHEAD
            attrs = candidate.attributes
            # an agent's or LLM call's content (include_llm_spans makes LLM calls candidates)
            # is a piece of whatever interaction holds it
            if candidate.kind in (AGENT, LLM) and (not CONTENT_KEY_SET.isdisjoint(attrs)
                                                   or span.events):
                self._add(entry, content_size(attrs), lambda: self._keep(entry, span, attrs))
        return True

    def take_pending(self, trace_id: int) -> Pending | None:
        """The trace's pending candidates (taken: each is resolved once), or ``None``."""
        with self._lock:
            entry = self._traces.get(trace_id)
            if entry is None or not entry.pending:
                return None
            return self._take(trace_id, entry)

    def pending_traces(self, idle_since: float | None = None) -> list[int]:
        """Traces with pending candidates (``idle_since``: only those where nothing happened
        since that monotonic time)."""
        with self._lock:
            return [trace_id for trace_id, entry in self._traces.items() if entry.pending
                    and (idle_since is None or entry.touched <= idle_since)]

    def content_count(self, trace_id: int) -> int:
        """LLM calls and content records buffered for a trace (what went unjudged when it
        held no interaction)."""
        with self._lock:
            entry = self._traces.get(trace_id)
            return 0 if entry is None else len(entry.llm) + entry.record_count

    def observe_record(self, trace_id: int, span_id: int, content: RecordContent) -> None:
        """Record the content of a log record emitted for span ``span_id`` of ``trace_id``."""
        with self._lock:
            entry = self._entry(trace_id)

            entry.touched = time.monotonic()

            def keep() -> None:
                entry.records.setdefault(span_id, []).append(content)
                entry.record_count += 1
            self._add(entry, SPAN_OVERHEAD + content.size, keep,
                      count=entry.record_count)

    def _add(self, entry: TraceEntry, size: int, keep: Any, *, count: int | None = None,
             make_room: bool = False) -> bool:
        """Keep a piece or a record (``keep``) within the bounds; ``False``: refused."""
        held = len(entry.spans) if count is None else count
        if held >= self.max_spans_per_trace:
            self.dropped[Reason.SPAN_LIMIT] += 1
            if not make_room:
                return False
            self._let_go(entry)
        if self._bytes + size > self.max_bytes:
            self.dropped[Reason.BYTE_LIMIT] += 1
            return False
        keep()
        entry.size += size
        self._bytes += size
        return True

    def _let_go(self, entry: TraceEntry) -> None:
        """A trace at its span bound: the first half of its pieces stays (the question, the
        first steps), the oldest of the rest makes room (so the last ones, the answer and the
        last steps, are kept), and what it was is counted (its step: a tool's name, a
        failure), so a check on every step still sees it."""
        span, attrs = entry.spans.pop(self.max_spans_per_trace // 2)
        size = content_size(attrs)
        entry.size -= size
        self._bytes -= size
        entry.count_cut(span, attrs)
        if span.context is not None and span.context.span_id in entry.own_links:
            entry.own_links.discard(span.context.span_id)
            entry.parents.pop(span.context.span_id, None)

    def cut_of(self, span: ReadableSpan) -> StepCounts | None:
        """The steps of ``span``'s trace that no run of it sees whole (``None``: none): those
        let go past the span bound or refused for the byte budget, and, when links were lost
        (past the links bound), the pieces kept that cannot be placed under any span."""
        if span.context is None:
            return None
        with self._lock:
            entry = self._traces.get(span.context.trace_id)
            if entry is None:
                return None
            if not entry.unlinked:
                return entry.cut
            spans = list(entry.spans)
            parents = dict(entry.parents)
            cut = entry.cut
        root = span.context.span_id
        lost = [step for piece, attrs in spans if piece.context is not None
                and unplaced(piece.context.span_id, parents, root)
                and (step := step_of_span(piece, attrs)) is not None]
        if not lost:
            return cut
        counted = StepCounts.of(lost)
        return counted if cut is None else cut.plus(counted)

    # -- reading (worker) ------------------------------------------------------------------
    def pieces_under(self, agent: ReadableSpan, *, nested_own: bool = False
                     ) -> tuple[list[Piece], int]:
        """The pieces under ``agent`` that belong to it (buffered spans and records of its
        descendants; all of them with ``nested_own``), and how many pieces were left out as a
        nested agent span's."""
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
            agent_attrs = dict(entry.agent_attrs)
        return pieces_under(agent.context.span_id, spans, records, parents, agents,
                            nested_own=nested_own, agent_attrs=agent_attrs)

    def links(self, span: ReadableSpan) -> dict[int, int | None]:
        """The parent links of ``span``'s trace (child span id -> parent span id)."""
        if span.context is None:
            return {}
        with self._lock:
            entry = self._traces.get(span.context.trace_id)
            return dict(entry.parents) if entry is not None else {}

    def records_of(self, span: ReadableSpan) -> tuple[RecordContent, ...]:
        """The content records emitted for ``span`` itself."""
        if span.context is None:
            return ()
        with self._lock:
            entry = self._traces.get(span.context.trace_id)
            if entry is None:
                return ()
            return tuple(entry.records.get(span.context.span_id, ()))
