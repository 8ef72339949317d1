"""Providers that send this library's own telemetry over OTLP/HTTP (``rescore --emit``,
``serve``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource

__all__ = ["Telemetry"]


class Telemetry:
    """Tracer, meter and logger providers exporting over OTLP/HTTP (protobuf) to ``endpoint``
    (the base URL: ``/v1/traces``, ``/v1/metrics`` and ``/v1/logs`` are appended), for the
    evaluation telemetry of ``rescore --emit`` and ``serve``. ``shutdown`` flushes them."""

    def __init__(self, endpoint: str, *, service_name: str, metric_interval_s: float = 10.0,
                 extra_readers: Sequence[Any] = (), headers: Mapping[str, str] | None = None
                 ) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        base = endpoint.rstrip("/")
        resource = Resource.create({"service.name": service_name})
        self.endpoint = base
        self.tracer_provider = TracerProvider(resource=resource)
        extra = dict(headers) if headers else None  # None: OTEL_EXPORTER_OTLP_HEADERS applies
        self.tracer_provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=extra)))
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics",
                                                             headers=extra),
                                          export_interval_millis=metric_interval_s * 1000),
            *extra_readers])
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{base}/v1/logs", headers=extra)))

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()  # each flushes what it holds
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()
