"""Enriched export: the evaluated span itself, exported with its score attributes added.

When the processor owns the exporter, every span goes out through one SDK
``BatchSpanProcessor``. A span selected for scoring is held (bounded in count and time) until
all its scorers finish, then exported as a copy with ``otel_scorers.<scorer>.*`` attributes.
Past ``hold_timeout_s``, or when ``max_held`` spans are already held, it is exported as it is
(with whatever scores have arrived) and counted: a span is never lost or held forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_scorers.names import Reason

__all__ = ["EnrichedExport"]

logger = logging.getLogger(__name__)


@dataclass
class _Held:
    span: ReadableSpan
    deadline: float
    pending: int
    attributes: dict[str, Any] = field(default_factory=dict)


def with_attributes(span: ReadableSpan, extra: dict[str, Any]) -> ReadableSpan:
    """A copy of an ended span with ``extra`` attributes added."""
    if not extra:
        return span
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes={**(span.attributes or {}), **extra}, events=span.events, links=span.links,
        kind=span.kind, status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class EnrichedExport:
    """Holds selected spans until scored, then hands them to a batch processor."""

    def __init__(self, exporter: SpanExporter, *, hold_timeout_s: float = 30.0,
                 max_held: int = 2_048,
                 on_unscored: Callable[[str, int], None] | None = None,
                 batch: BatchSpanProcessor | None = None) -> None:
        self.exporter = exporter
        self.hold_timeout_s = hold_timeout_s
        self.max_held = max_held
        self._batch = batch or BatchSpanProcessor(exporter)
        self._held: dict[int, _Held] = {}
        self._lock = threading.Lock()
        self._on_unscored = on_unscored or (lambda reason, count: None)

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock; the parent's held spans are the parent's to
        export (the batch processor inside restarts its own worker)."""
        self._lock = threading.Lock()
        self._held = {}

    def __len__(self) -> int:
        return len(self._held)

    def forward(self, span: ReadableSpan) -> None:
        """Export a span that is not waiting for scores."""
        self._batch.on_end(span)

    def hold(self, span: ReadableSpan, pending: int) -> bool:
        """Hold ``span`` for ``pending`` results; when full, export it now and return False."""
        if span.context is None:
            self.forward(span)
            return False
        with self._lock:
            if len(self._held) < self.max_held:
                self._held[span.context.span_id] = _Held(
                    span, time.monotonic() + self.hold_timeout_s, pending)
                return True
        self._on_unscored(Reason.HOLD_OVERFLOW, 1)
        self.forward(span)
        return False

    def add(self, span_id: int, attributes: dict[str, Any]) -> None:
        """One scorer finished for ``span_id``: merge its attributes; release when all are in."""
        with self._lock:
            held = self._held.get(span_id)
            if held is None:
                return  # already released (timed out): the late scores have their own spans
            held.attributes.update(attributes)
            held.pending -= 1
            if held.pending > 0:
                return
            del self._held[span_id]
        self.forward(with_attributes(held.span, held.attributes))

    def release(self, span_id: int) -> None:
        """Export a held span now, as it is (its evaluation will not happen)."""
        with self._lock:
            held = self._held.pop(span_id, None)
        if held is not None:
            self.forward(with_attributes(held.span, held.attributes))

    def sweep(self, now: float | None = None) -> int:
        """Export spans whose hold expired, with the scores that did arrive."""
        now = time.monotonic() if now is None else now
        with self._lock:
            expired = [k for k, h in self._held.items() if h.deadline <= now]
            released = [self._held.pop(k) for k in expired]
        for held in released:
            self.forward(with_attributes(held.span, held.attributes))
        if released:
            self._on_unscored(Reason.HOLD_TIMEOUT, len(released))
        return len(released)

    def release_all(self, reason: str) -> int:
        """Export everything held, scored or not (shutdown)."""
        with self._lock:
            released = list(self._held.values())
            self._held.clear()
        for held in released:
            self.forward(with_attributes(held.span, held.attributes))
        if released:
            self._on_unscored(reason, len(released))
        return len(released)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._batch.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self._batch.shutdown()  # type: ignore[no-untyped-call]
