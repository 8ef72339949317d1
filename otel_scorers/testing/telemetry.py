"""``CapturedTelemetry``: real OTel SDK providers whose output stays in memory, for tests.

A tracer provider with an in-memory span exporter, a meter provider with an in-memory metric
reader and a logger provider with an in-memory log exporter, plus helpers to read back what a
processor emitted (evaluation spans, ``gen_ai.evaluation.result`` events, metric points).
Everything is the real SDK; only the export destination is memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["CapturedTelemetry"]

SCOPE_NAME = "otel_scorers"


@dataclass
class CapturedTelemetry:
    """Providers exporting to memory. ``create()`` builds them; ``shutdown()`` ends them.

    The span exporter is not attached to the tracer provider: add it (``SimpleSpanProcessor
    (captured.spans_out)``) after the scoring processor, or give it to the processor as its
    ``exporter`` for enriched export.
    """

    tracer_provider: TracerProvider
    spans_out: InMemorySpanExporter
    meter_provider: MeterProvider
    reader: InMemoryMetricReader
    logger_provider: LoggerProvider
    logs_out: InMemoryLogRecordExporter

    @classmethod
    def create(cls) -> CapturedTelemetry:
        reader = InMemoryMetricReader()
        logs_out = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs_out))
        return cls(TracerProvider(), InMemorySpanExporter(),
                   MeterProvider(metric_readers=[reader]), reader, logger_provider, logs_out)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        self.logger_provider.shutdown()

    # -- reading back -----------------------------------------------------------------------
    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def app_spans(self) -> list[ReadableSpan]:
        """Exported spans that are not this library's own."""
        return [s for s in self.spans() if s.instrumentation_scope is None
                or s.instrumentation_scope.name != SCOPE_NAME]

    def evaluation_spans(self, scorer: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("gen_ai.evaluation")
                and (scorer is None
                     or (s.attributes or {}).get("gen_ai.evaluation.name") == scorer)]

    def logs(self) -> list[Any]:
        return list(self.logs_out.get_finished_logs())

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Metric points by instrument name: ``(attributes, value)``; histograms give
        ``(count, sum)`` as the value."""
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points = out.setdefault(metric.name, [])
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = (point.count, point.sum)  # type: ignore[union-attr]
                        points.append((dict(point.attributes or {}), value))
        return out

    def metric_value(self, name: str, **attrs: Any) -> Any:
        """The sum over points of ``name`` whose attributes include ``attrs`` (a histogram
        counts its observations); ``None`` when no point matches."""
        total = 0
        found = False
        for point_attrs, value in self.metrics().get(name, []):
            if all(point_attrs.get(k) == v for k, v in attrs.items()):
                total += value if not isinstance(value, tuple) else value[0]
                found = True
        return total if found else None

    def tracer(self, name: str = "app") -> Any:
        return self.tracer_provider.get_tracer(name)
