"""``ScoringLogProcessor``: the log side of a scoring processor.

The OTel GenAI instrumentations can put the conversation on log records (events) instead of
span attributes (``EVENT_ONLY``), or on both (``SPAN_AND_EVENT``). Registered on the
``LoggerProvider`` (by :func:`otel_scorers.install` or the zero-code setup, ahead of any
exporting processor), this processor hands every record that carries GenAI content to its
:class:`~otel_scorers.pipeline.processor.ScoringSpanProcessor`, which keeps the content for the
record's span (joined by trace and span id, bounded like the trace buffer) and, with
``exported_content: strip``, removes it from the record before it is exported.

``on_emit`` never raises and never blocks: a dict scan of the record's attributes unless the
record is a GenAI one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs import LogRecordProcessor

if TYPE_CHECKING:
    from otel_scorers.pipeline.processor import ScoringSpanProcessor

__all__ = ["ScoringLogProcessor"]

logger = logging.getLogger(__name__)


class ScoringLogProcessor(LogRecordProcessor):
    """Feeds GenAI content from log records to a scoring processor (see the module doc)."""

    def __init__(self, processor: ScoringSpanProcessor) -> None:
        self.processor = processor
        self._failed = False

    def on_emit(self, log_record: Any) -> None:
        try:
            # SDK >= 1.35 passes a ReadWriteLogRecord wrapping the API record; older ones the
            # record itself.
            self.processor.observe_record(getattr(log_record, "log_record", log_record))
        except Exception:
            if not self._failed:
                self._failed = True
                logger.warning("otel-scorers could not read a log record; it was passed on "
                               "as it is", exc_info=True)

    def emit(self, log_data: Any) -> None:  # the SDK's pre-1.35 name for on_emit
        self.on_emit(log_data)

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
