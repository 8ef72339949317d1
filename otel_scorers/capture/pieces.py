"""Pieces of an interaction under its span, and which span owns each.

A :class:`Piece` is one span under an interaction that matters to judging it: an LLM call's
content (its span attributes, its log records, its span events), or a step the agent took (a
tool call, a retrieval, a handoff), with its kind, name, times and error. By default every
piece under an interaction's span is its own (``nested=True``: one interaction, one
evaluation, whatever agents and steps it contains). With per-agent evaluation, a piece belongs
to the innermost selected agent span above it instead, so a run assembled for an outer agent
span leaves out what nested agent spans own. A record whose span left no parent link (it
arrived after the span, at a gateway) is placed by time: the innermost selected agent span
whose lifetime covers its timestamp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_scorers.capture.kinds import AGENT, span_kind
from otel_scorers.capture.logs import RecordContent, original_events, span_records

__all__ = ["Piece", "descends_from", "pieces_under"]


@dataclass(frozen=True)
class Piece:
    """One span under an interaction: its attributes, the log records emitted for it and its
    GenAI span events (as records), its kind (:mod:`otel_scorers.capture.kinds`), name, times,
    parent and error (the status description of a failed span)."""

    span_id: int
    start: int
    end: int
    attributes: Mapping[str, Any] | None = None
    records: tuple[RecordContent, ...] = ()
    kind: str | None = None
    name: str = ""
    parent: int | None = None
    error: str | None = None

    @classmethod
    def of_span(cls, span: ReadableSpan, attributes: Mapping[str, Any] | None = None,
                records: Sequence[RecordContent] = ()) -> Piece:
        context = span.context
        attrs = attributes if attributes is not None else (span.attributes or {})
        originals = original_events(span)
        events = span_records(originals) if originals else ()
        status = span.status
        error = None
        if status is not None and status.status_code is StatusCode.ERROR:
            error = status.description or "error"
        return cls(context.span_id if context is not None else 0, span.start_time or 0,
                   span.end_time or 0, attrs, (*records, *events), span_kind(attrs), span.name,
                   span.parent.span_id if span.parent is not None else None, error)


def pieces_under(root: int, spans: Sequence[tuple[ReadableSpan, Mapping[str, Any]]],
                 records: Mapping[int, Sequence[RecordContent]],
                 parents: Mapping[int, int | None], agents: Mapping[int, tuple[int, int]],
                 *, nested_own: bool = False,
                 agent_attrs: Mapping[int, Mapping[str, Any]] | None = None
                 ) -> tuple[list[Piece], int]:
    """The pieces owned by span ``root`` (each buffered span, or span with records, below it
    whose nearest selected agent ancestor is ``root`` itself, or any below it with
    ``nested_own``; a record whose span left no parent link, by time), and the count of pieces
    below it that a nested agent span owns. ``agent_attrs`` (agent span id -> attributes): the
    agent spans below it that carry no content are pieces too (kind ``agent``, no content:
    they name the agent each step ran under, after a handoff the agent handed to)."""
    by_id: dict[int, Piece] = {}
    nested: set[int] = set()
    owners: Mapping[int, tuple[int, int]] = {} if nested_own else agents
    for span, attrs in spans:
        context = span.context
        if context is None or context.span_id == root:
            continue
        owner = _owner(context.span_id, root, parents, owners)
        if owner == root:
            by_id[context.span_id] = Piece.of_span(span, attrs,
                                                   records.get(context.span_id, ()))
        elif owner is not None:
            nested.add(context.span_id)
    for span_id, own in records.items():
        if span_id in by_id or span_id in nested or span_id == root or not own:
            continue
        owner = (_owner(span_id, root, parents, owners) if span_id in parents
                 else _owner_by_time(min(r.timestamp for r in own), root, agents, nested_own))
        if owner == root:
            by_id[span_id] = Piece(span_id, min(r.timestamp for r in own),
                                   max(r.timestamp for r in own), None, tuple(own))
        elif owner is not None:
            nested.add(span_id)
    for span_id, attrs in (agent_attrs or {}).items():
        if span_id == root or span_id in by_id or span_id not in agents:
            continue
        if _owner(span_id, root, parents, owners) == root:
            start, end = agents[span_id]
            by_id[span_id] = Piece(span_id, start, end, attrs, (), AGENT, "",
                                   parents.get(span_id))
    return list(by_id.values()), len(nested)


def _owner_by_time(timestamp: int, root: int, agents: Mapping[int, tuple[int, int]],
                   nested_own: bool = False) -> int | None:
    """The innermost selected agent span whose lifetime covers ``timestamp`` (``root`` itself
    with ``nested_own``), if ``root`` is among those covering it (else the record is not under
    ``root``)."""
    covering = [(start, span_id) for span_id, (start, end) in agents.items()
                if start <= timestamp <= end]
    if root not in {span_id for _, span_id in covering}:
        return None
    return root if nested_own else max(covering)[1]


def _owner(span_id: int, root: int, parents: Mapping[int, int | None],
           agents: Mapping[int, tuple[int, int]] | set[int]) -> int | None:
    """The nearest selected agent span above ``span_id`` (``root`` when it is the first one
    met), or ``None`` when ``span_id`` is not under ``root``."""
    current = parents.get(span_id)
    found: int | None = None
    for _ in range(64):
        if current is None:
            return None
        if current == root:
            return found if found is not None else root
        if current in agents and found is None:
            found = current
        current = parents.get(current)
    return None


def descends_from(span_id: int, root: int, parents: Mapping[int, int | None]) -> bool:
    """Whether ``span_id`` is under ``root`` through ``parents`` (child -> parent span ids)."""
    current: int | None = parents.get(span_id)
    for _ in range(64):
        if current is None:
            return False
        if current == root:
            return True
        current = parents.get(current)
    return False
