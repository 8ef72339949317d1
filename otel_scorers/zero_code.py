"""Zero-code setup: ``opentelemetry-instrument`` adds the scoring processor from env vars alone.

Registered as the ``otel_scorers`` entry point of the ``opentelemetry_instrumentor`` group, so
``opentelemetry-instrument python app.py`` loads it after the SDK configurator has set the
global tracer provider. It does nothing unless ``OTEL_SCORERS_ENABLED=true`` (or a config file
named by ``OTEL_SCORERS_CONFIG`` says ``enabled: true``); everything else comes from the same
``OTEL_SCORERS_*`` variables and file as :func:`otel_scorers.config.load_settings`.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

from otel_scorers.config import load_settings

__all__ = ["ScoringInstrumentor"]

logger = logging.getLogger(__name__)


class ScoringInstrumentor:
    """The entry-point object ``opentelemetry-instrument`` calls ``instrument()`` on."""

    _processor: Any = None

    def instrument(self, **_kwargs: Any) -> None:
        if ScoringInstrumentor._processor is not None:
            return
        if not load_settings().settings.enabled:
            logger.debug("otel-scorers installed but not enabled (OTEL_SCORERS_ENABLED)")
            return
        provider = trace.get_tracer_provider()
        add = getattr(provider, "add_span_processor", None)
        if add is None:
            logger.warning("otel-scorers: the global tracer provider is not an SDK provider "
                           "(%s); scoring is not enabled", type(provider).__name__)
            return
        from otel_scorers.pipeline.processor import ScoringSpanProcessor

        processor = ScoringSpanProcessor()
        add(processor)
        ScoringInstrumentor._processor = processor
        logger.info("otel-scorers: scoring %s", ", ".join(s.name for s in processor.scorers))

    def uninstrument(self, **_kwargs: Any) -> None:
        processor, ScoringInstrumentor._processor = ScoringInstrumentor._processor, None
        if processor is not None:
            processor.shutdown()
