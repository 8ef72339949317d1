"""``ScoringLogProcessor``: the log side of a scoring processor.

The OTel GenAI instrumentations can put the conversation on log records (events) instead of
span attributes (``EVENT_ONLY``), or on both (``SPAN_AND_EVENT``). Registered on the
``LoggerProvider`` (by :func:`otel_scorers.install` or the zero-code setup, ahead of any
exporting processor), this processor keeps the GenAI content of every record for the record's
span (joined by trace and span id, in the processor's bounded trace buffer), brings back runs
that were waiting for it, and, with ``exported_content: strip``, removes the content from the
record before it is exported. The gateway feeds it decoded OTLP records the same way.

``on_emit`` never raises and never blocks: a dict scan of the record's attributes unless the
record is a GenAI one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor

from otel_scorers.capture.logs import content_of
from otel_scorers.capture.strip import record_event_name
from otel_scorers.capture.trace import TraceBuffer
from otel_scorers.pipeline.content import ContentStripper
from otel_scorers.pipeline.deferral import Deferred

__all__ = ["ScoringLogProcessor"]

logger = logging.getLogger(__name__)


class ScoringLogProcessor(LogRecordProcessor):
    """Feeds GenAI content from log records to a scoring processor (see the module doc)."""

    def __init__(self, *, buffer: TraceBuffer, deferred: Deferred,
                 stripper: ContentStripper | None, stopped: Callable[[], bool]) -> None:
        self._buffer = buffer
        self._deferred = deferred
        self._stripper = stripper
        self._stopped = stopped
        self._failed = False

    def on_emit(self, log_record: Any) -> None:
        try:
            # SDK >= 1.35 passes a ReadWriteLogRecord wrapping the API record; older ones the
            # record itself.
            self.observe(getattr(log_record, "log_record", log_record))
        except Exception:
            if not self._failed:
                self._failed = True
                logger.warning("otel-scorers could not read a log record; it was passed on "
                               "as it is", exc_info=True)

    def emit(self, log_data: Any) -> None:  # the SDK's pre-1.35 name for on_emit
        self.on_emit(log_data)

    def observe(self, record: Any) -> None:
        """Keep a record's GenAI content for its span; strip it when configured to."""
        attributes = getattr(record, "attributes", None)
        event = record_event_name(getattr(record, "event_name", None), attributes)
        if not event.startswith("gen_ai.") and not (
                attributes and ContentStripper.has_genai_key(attributes)):
            return
        content = content_of(event, attributes, getattr(record, "body", None),
                             getattr(record, "timestamp", None)
                             or getattr(record, "observed_timestamp", None))
        if content is None:
            return
        trace_id = getattr(record, "trace_id", None) or 0
        span_id = getattr(record, "span_id", None) or 0
        if trace_id and span_id and not self._stopped():
            self._buffer.observe_record(trace_id, span_id, content)
            self._deferred.arrived(trace_id)
        if self._stripper is not None:
            self._stripper.strip_record(record)

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
