"""Selected agent runs of OTLP trace files, streamed: a bounded window of open traces.

Files are read one record at a time. A trace stays open while its spans keep arriving; once
``window`` records have gone by without one (or the input ends, or more than ``max_traces``
traces are open), each interaction of it becomes a :class:`RunRef` with the pieces it holds
(the same rule as live, :func:`otel_scorers.capture.interactions.resolve`: the topmost agent,
workflow or chain span of each part of the trace; with per-agent evaluation, every agent span,
owning the LLM calls no nested agent span owns), and the trace is forgotten. Memory is
therefore bounded by the window and the largest record, never by the file. A run whose spans
lie further apart in the file than the window is judged with what had arrived (the
Collector's file exporter writes a trace's spans close together).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture import attribute_dict
from otel_scorers.capture.interactions import Candidate, resolve
from otel_scorers.capture.kinds import AGENT, LLM, span_kind
from otel_scorers.capture.pieces import Piece, pieces_under
from otel_scorers.capture.trace import CONTENT_KEY_SET
from otel_scorers.otlp import read_requests, spans_of
from otel_scorers.pipeline.processor import ScoringSpanProcessor

__all__ = ["RunRef", "RunStream"]


@dataclass(frozen=True)
class RunRef:
    """A selected span to judge, with the content under it that it owns (``nested``: pieces
    under it that nested agent spans own, judged on their own)."""

    span: ReadableSpan
    descendants: tuple[Piece, ...] = ()
    nested: int = 0
    #: the interaction's agent when its span names none (a workflow root)
    agent: str | None = None
    #: the session the interaction belongs to (its key), when it carries one
    session: str | None = None
    #: its trace's child -> parent span ids (the agent each step ran under)
    links: Mapping[int, int | None] = field(default_factory=dict)

    @property
    def trace_id(self) -> str:
        assert self.span.context is not None
        return f"{self.span.context.trace_id:032x}"

    @property
    def span_id(self) -> str:
        assert self.span.context is not None
        return f"{self.span.context.span_id:016x}"


@dataclass
class _Trace:
    last: int
    parents: dict[int, int | None] = field(default_factory=dict)
    content: list[tuple[ReadableSpan, Mapping[str, Any]]] = field(default_factory=list)
    agents: dict[int, tuple[int, int]] = field(default_factory=dict)
    agent_attrs: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    selected: list[Candidate] = field(default_factory=list)
    llm: set[int] = field(default_factory=set)


class RunStream:
    """Reads files and yields their selected runs (see the module docstring).

    ``keep_content=False`` keeps only what counting needs (a dry count of runs before judging).
    After iterating, ``spans`` is the number of spans read and ``unselected`` the number of
    spans with conversation content that no selected run used.
    """

    def __init__(self, processor: ScoringSpanProcessor, *, window: int = 8,
                 max_traces: int = 10_000, keep_content: bool = True) -> None:
        self.processor = processor
        self.window = window
        self.max_traces = max_traces
        self.keep_content = keep_content
        self.spans = 0
        self.unselected = 0
        self._traces: dict[int, _Trace] = {}

    def runs(self, paths: Iterable[str | Path]) -> Iterator[RunRef]:
        record = 0
        for path in paths:
            for request in read_requests(path):
                record += 1
                ended = sorted(spans_of(request), key=lambda s: s.end_time or 0)
                for span in ended:
                    self._add(span, record)
                yield from self._close(lambda trace, r=record: trace.last <= r - self.window)
        yield from self._close(lambda _trace: True)

    def _add(self, span: ReadableSpan, record: int) -> None:
        self.spans += 1
        context = span.context
        assert context is not None
        trace = self._traces.get(context.trace_id)
        if trace is None:
            trace = self._traces[context.trace_id] = _Trace(record)
        trace.last = record
        trace.parents[context.span_id] = span.parent.span_id if span.parent else None
        attrs = attribute_dict(span)
        kind = self.processor.on_demand.candidate_kind(span)
        if kind is not None:
            trace.selected.append(Candidate(span, attrs, kind))
            if kind != LLM:
                trace.agents[context.span_id] = (span.start_time or 0, span.end_time or 0)
                if kind == AGENT:
                    trace.agent_attrs[context.span_id] = attrs
        # pieces as live (TraceBuffer): content and step spans that are no candidate, and
        # agent candidates with content (a nested agent's turn); never a chain candidate
        content = not CONTENT_KEY_SET.isdisjoint(attrs)
        if (kind is None and (content or span_kind(attrs) is not None)) or (
                kind in (AGENT, LLM) and (content or span.events)):
            trace.content.append((span, attrs if self.keep_content else {}))
            if content or span_kind(attrs) == LLM:
                trace.llm.add(context.span_id)

    def _close(self, done: Any) -> Iterator[RunRef]:
        closing = [key for key, trace in self._traces.items() if done(trace)]
        overflow = len(self._traces) - len(closing) - self.max_traces
        if overflow > 0:  # too many open traces: the least recently seen ones close early
            still_open = sorted((t.last, k) for k, t in self._traces.items() if k not in closing)
            closing += [key for _, key in still_open[:overflow]]
        for key in closing:
            yield from self._runs_of(self._traces.pop(key))

    def _runs_of(self, trace: _Trace) -> Iterator[RunRef]:
        used: set[int] = set()
        selected = {c.span_id for c in trace.selected}
        for span, agent, nested_own, session in self._roots(trace):
            assert span.context is not None
            pieces, nested = pieces_under(span.context.span_id, trace.content, {},
                                          trace.parents, trace.agents, nested_own=nested_own,
                                          agent_attrs=trace.agent_attrs)
            used.update(piece.span_id for piece in pieces)
            yield RunRef(span, tuple(pieces), nested, agent, session, trace.parents)
        self.unselected += sum(1 for span, _ in trace.content if span.context is not None
                               and span.context.span_id not in used
                               and span.context.span_id not in selected
                               and span.context.span_id in trace.llm)

    def _roots(self, trace: _Trace
               ) -> Iterator[tuple[ReadableSpan, str | None, bool, str | None]]:
        """The spans to judge: every agent span (per-agent), else the interactions; each
        with its agent, whether it owns its nested agents' pieces, and its session key."""
        key_of = self.processor.on_demand.session_key_of
        if self.processor.on_demand.per_agent:
            for candidate in trace.selected:
                yield (candidate.span, None, False,
                       key_of([candidate.attributes], _resource(candidate.span)))
            return
        interactions, _ = resolve(trace.selected, trace.parents, trace.llm)
        for interaction in interactions:
            if self.processor.on_demand.keeps(interaction.agents):
                yield (interaction.root.span, interaction.agent, True,
                       key_of([c.attributes for c in (interaction.root, *interaction.inner)],
                              _resource(interaction.root.span)))


def _resource(span: ReadableSpan) -> Mapping[str, Any] | None:
    return span.resource.attributes if span.resource is not None else None
