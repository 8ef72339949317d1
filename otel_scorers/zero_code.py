"""Zero-code setup: ``opentelemetry-instrument`` adds the scoring processor from env vars alone.

Registered as the ``otel_scorers`` entry point of the ``opentelemetry_instrumentor`` group, so
``opentelemetry-instrument python app.py`` loads it after the SDK configurator has set the
global tracer provider. It does nothing unless ``OTEL_SCORERS_ENABLED=true`` (or a config file
named by ``OTEL_SCORERS_CONFIG`` says ``enabled: true``); everything else comes from the same
``OTEL_SCORERS_*`` variables and file as :func:`otel_scorers.config.load_settings`. It wires
both sides, as :func:`otel_scorers.install` does: the span processor first on the global tracer
provider, its log side first on the global logger provider (so content in log events is read,
and ``OTEL_SCORERS_EXPORTED_CONTENT=strip`` applies to exported spans and logs alike).
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import get_logger_provider

from otel_scorers.config import load_settings

__all__ = ["ScoringInstrumentor"]

logger = logging.getLogger(__name__)


class ScoringInstrumentor:
    """The entry-point object ``opentelemetry-instrument`` calls ``instrument()`` on.

    A bad otel-scorers configuration never takes the application's other instrumentations
    down: it is logged as one error and scoring stays off.
    """

    _processor: Any = None

    def instrument(self, **_kwargs: Any) -> None:
        if ScoringInstrumentor._processor is not None:
            return
        try:
            self._install()
        except Exception as exc:  # the application must run, with or without scoring
            logger.error("otel-scorers: scoring is disabled: %s", exc)

    def _install(self) -> None:
        if not load_settings().settings.enabled:
            logger.debug("otel-scorers installed but not enabled (OTEL_SCORERS_ENABLED)")
            return
        provider = trace.get_tracer_provider()
        if not hasattr(provider, "add_span_processor"):
            logger.warning("otel-scorers: the global tracer provider is not an SDK provider "
                           "(%s); scoring is not enabled", type(provider).__name__)
            return
        from otel_scorers.pipeline.install import events_configured, install

        logger_provider = get_logger_provider()
        if not hasattr(logger_provider, "add_log_record_processor") and events_configured():
            # The GenAI instrumentations emit their content as log events, but no logs
            # pipeline is set up (OTEL_LOGS_EXPORTER=none): a provider of our own, exporting
            # nothing, lets the judge read them.
            from opentelemetry._logs import set_logger_provider
            from opentelemetry.sdk._logs import LoggerProvider

            resource = getattr(provider, "resource", None)
            logger_provider = LoggerProvider(resource=resource) if resource else LoggerProvider()
            set_logger_provider(logger_provider)
        processor = install(tracer_provider=provider, logger_provider=logger_provider)
        ScoringInstrumentor._processor = processor
        logger.info("otel-scorers: scoring %s", ", ".join(s.name for s in processor.scorers))

    def uninstrument(self, **_kwargs: Any) -> None:
        processor, ScoringInstrumentor._processor = ScoringInstrumentor._processor, None
        if processor is not None:
            processor.shutdown()
