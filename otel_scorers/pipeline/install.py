"""``otel_scorers.install()``: one call that wires scoring into an application's providers.

It builds a :class:`ScoringSpanProcessor` and registers it *first* on the tracer provider, and
its log side (:class:`ScoringLogProcessor`) first on the logger provider: first, so that it
sees every span and log record before an exporting processor does (it reads their content, and
with ``exported_content="strip"`` removes it before export), and so that GenAI content carried
by log records (``EVENT_ONLY`` instrumentations) reaches the judge. Evaluation spans, events
and metrics go to the same providers.

The SDK offers no public way to put a processor first; this reaches into the providers' chains
(``SynchronousMultiSpanProcessor._span_processors``, the multi log processor's
``_log_record_processors``), which have kept their shape across SDK releases, and falls back to
appending (with a warning when ``strip`` then cannot be guaranteed).
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import get_logger_provider

from otel_scorers.errors import ConfigError
from otel_scorers.pipeline.processor import ScoringSpanProcessor

__all__ = ["install", "prepend"]

logger = logging.getLogger(__name__)


def install(*, tracer_provider: Any = None, logger_provider: Any = None,
            **options: Any) -> ScoringSpanProcessor:
    """Score agent runs of ``tracer_provider`` (default: the global one).

    ``options`` are :class:`ScoringSpanProcessor` arguments (scorers, selection, sampling,
    ``exported_content``, ...). The log side is registered on ``logger_provider`` (default: the
    global one) when it is an SDK ``LoggerProvider``; without one, content that lives only in
    log records cannot be read (a warning says so when the GenAI instrumentations are set to
    emit events). Returns the processor: call ``force_flush()`` on it before a short process
    ends if you want to wait for scores (at exit, pending evaluations get ``exit_timeout_s``).
    """
    tracer_provider = tracer_provider or trace.get_tracer_provider()
    if not hasattr(tracer_provider, "add_span_processor"):
        raise ConfigError(f"the tracer provider ({type(tracer_provider).__name__}) is not an "
                          "OpenTelemetry SDK TracerProvider: set one up before install()")
    logger_provider = logger_provider or get_logger_provider()
    has_logs = hasattr(logger_provider, "add_log_record_processor")
    processor = ScoringSpanProcessor(tracer_provider=tracer_provider,
                                     logger_provider=logger_provider if has_logs else None,
                                     **options)
    strip = processor.settings.exported_content == "strip"
    prepend(tracer_provider, processor, chain="_active_span_processor",
            items="_span_processors", add="add_span_processor", strict=strip)
    if has_logs:
        prepend(logger_provider, processor.log_processor(), chain="_multi_log_record_processor",
                items="_log_record_processors", add="add_log_record_processor", strict=strip)
    elif events_configured():
        logger.warning("otel-scorers: the GenAI instrumentations are set to emit content as log "
                       "events, but there is no SDK LoggerProvider to read them from; runs whose "
                       "content is only in events will not be scored")
    return processor


def prepend(provider: Any, processor: Any, *, chain: str, items: str, add: str,
            strict: bool) -> None:
    """Put ``processor`` at the front of ``provider``'s processor chain."""
    multi = getattr(provider, chain, None)
    current = getattr(multi, items, None)
    lock = getattr(multi, "_lock", None)
    if isinstance(current, tuple) and lock is not None:
        with lock:
            setattr(multi, items, (processor, *getattr(multi, items)))
        return
    getattr(provider, add)(processor)
    if strict:
        logger.warning("otel-scorers: could not put the scoring processor first on %s; with "
                       "exported_content=strip, processors added before it may export content",
                       type(provider).__name__)


def events_configured() -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content events."""
    import os

    mode = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return mode.strip().upper() in ("EVENT_ONLY", "SPAN_AND_EVENT", "TRUE")
