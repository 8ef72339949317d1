"""Pieces of content under an agent span, and which agent span owns each.

A :class:`Piece` is one LLM call's content: its span attributes and/or its log records. One
interaction, one evaluation: a piece belongs to the innermost selected agent span above it, so
a run assembled for an outer agent span leaves out what nested agent spans own. A record whose
span left no parent link (it arrived after the span, at a gateway) is placed by time: the
innermost selected agent span whose lifetime covers its timestamp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.logs import RecordContent

__all__ = ["Piece", "descends_from", "pieces_under"]


@dataclass(frozen=True)
class Piece:
    """The content of one LLM call under an agent span: the span's attributes (when they carry
    content) and the log records emitted for it, with its times for ordering."""

    span_id: int
    start: int
    end: int
    attributes: Mapping[str, Any] | None = None
    records: tuple[RecordContent, ...] = ()

    @classmethod
    def of_span(cls, span: ReadableSpan, attributes: Mapping[str, Any] | None = None,
                records: Sequence[RecordContent] = ()) -> Piece:
        context = span.context
        return cls(context.span_id if context is not None else 0, span.start_time or 0,
                   span.end_time or 0, attributes if attributes is not None
                   else (span.attributes or {}), tuple(records))


def pieces_under(root: int, spans: Sequence[tuple[ReadableSpan, Mapping[str, Any]]],
                 records: Mapping[int, Sequence[RecordContent]],
                 parents: Mapping[int, int | None], agents: Mapping[int, tuple[int, int]]
                 ) -> tuple[list[Piece], int]:
    """The pieces of content owned by agent span ``root`` (each content span, or span with
    records, below it whose nearest selected agent ancestor is ``root`` itself; a record whose
    span left no parent link, by time), and the count of pieces below it that a nested agent
    span owns."""
    by_id: dict[int, Piece] = {}
    nested: set[int] = set()
    for span, attrs in spans:
        context = span.context
        if context is None or context.span_id == root:
            continue
        owner = _owner(context.span_id, root, parents, agents)
        if owner == root:
            by_id[context.span_id] = Piece.of_span(span, attrs,
                                                   records.get(context.span_id, ()))
        elif owner is not None:
            nested.add(context.span_id)
    for span_id, own in records.items():
        if span_id in by_id or span_id in nested or span_id == root or not own:
            continue
        owner = (_owner(span_id, root, parents, agents) if span_id in parents
                 else _owner_by_time(min(r.timestamp for r in own), root, agents))
        if owner == root:
            by_id[span_id] = Piece(span_id, min(r.timestamp for r in own),
                                   max(r.timestamp for r in own), None, tuple(own))
        elif owner is not None:
            nested.add(span_id)
    return list(by_id.values()), len(nested)


def _owner_by_time(timestamp: int, root: int, agents: Mapping[int, tuple[int, int]]
                   ) -> int | None:
    """The innermost selected agent span whose lifetime covers ``timestamp``, if ``root`` is
    among those covering it (else the record is not under ``root``)."""
    covering = [(start, span_id) for span_id, (start, end) in agents.items()
                if start <= timestamp <= end]
    if root not in {span_id for _, span_id in covering}:
        return None
    return max(covering)[1]


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
