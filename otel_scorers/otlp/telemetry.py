"""Providers that send this library's own telemetry over OTLP/HTTP (``rescore --emit``,
``serve``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource

__all__ = ["Telemetry"]


def _counted(exporter_class: type[Any], tally: dict[str, int]) -> type[Any]:
    """``exporter_class`` counting its export results in ``tally`` (``ok`` / ``failed``)."""

    class Counted(exporter_class):  # type: ignore[misc]
        def export(self, *args: Any, **kwargs: Any) -> Any:
            result = super().export(*args, **kwargs)
            tally["ok" if getattr(result, "name", "") == "SUCCESS" else "failed"] += 1
            return result

    return Counted


class Telemetry:
    """Tracer, meter and logger providers exporting over OTLP/HTTP (protobuf) to ``endpoint``
    (the base URL: ``/v1/traces``, ``/v1/metrics`` and ``/v1/logs`` are appended), for the
    evaluation telemetry of ``rescore --emit``, ``calibrate --emit`` and ``serve``.
    ``shutdown`` flushes them; ``exports`` counts what went out and what failed, so nothing
    says "sent" that was not."""

    def __init__(self, endpoint: str, *, service_name: str, metric_interval_s: float = 10.0,
                 extra_readers: Sequence[Any] = (), headers: Mapping[str, str] | None = None,
                 timeout_s: float | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.exports = {"ok": 0, "failed": 0}
        span_exporter = _counted(OTLPSpanExporter, self.exports)
        metric_exporter = _counted(OTLPMetricExporter, self.exports)
        log_exporter = _counted(OTLPLogExporter, self.exports)
        base = endpoint.rstrip("/")
        resource = Resource.create({"service.name": service_name})
        self.endpoint = base
        self.tracer_provider = TracerProvider(resource=resource)
        extra = dict(headers) if headers else None  # None: OTEL_EXPORTER_OTLP_HEADERS applies
        # None: OTEL_EXPORTER_OTLP_TIMEOUT (10 s); serve bounds it by its --shutdown-timeout
        limit: dict[str, Any] = {"timeout": timeout_s} if timeout_s is not None else {}
        self.tracer_provider.add_span_processor(BatchSpanProcessor(
            span_exporter(endpoint=f"{base}/v1/traces", headers=extra, **limit)))
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(metric_exporter(endpoint=f"{base}/v1/metrics",
                                                          headers=extra, **limit),
                                          export_interval_millis=metric_interval_s * 1000),
            *extra_readers])
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            log_exporter(endpoint=f"{base}/v1/logs", headers=extra, **limit)))

    def shutdown(self) -> None:
        """Flush and stop the three providers, at the same time: a hung receiver costs one
        export timeout, not three."""
        import threading

        stops = [threading.Thread(target=provider.shutdown, daemon=True) for provider in (
            self.tracer_provider, self.logger_provider, self.meter_provider)]
        for stop in stops:
            stop.start()
        for stop in stops:
            stop.join()

    def outcome(self) -> str | None:
        """After ``shutdown``: ``None`` when every export succeeded, else what failed."""
        failed, done = self.exports["failed"], self.exports["ok"] + self.exports["failed"]
        if not failed:
            return None
        return (f"{failed} of {done} exports to {self.endpoint} failed (is an OTLP/HTTP "
                "receiver listening there? OTEL_EXPORTER_OTLP_ENDPOINT or --otlp-endpoint)")
