"""SDK exporters writing OTLP JSON lines to a file: one ``Export*ServiceRequest`` per line.

The shape the Collector's ``file`` exporter writes, and what ``otel-scorers rescore`` reads
(a line of logs or metrics holds no spans: it is read and skipped). The SDK has console
exporters, whose pretty-printed spans no OTLP tool reads back; these are their OTLP twins.
One stream may be shared by the three exporters (writes are serialized by a lock).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import IO, Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_scorers.otlp.bodies import request_to_json

__all__ = ["JsonLinesFile", "JsonLinesLogExporter", "JsonLinesMetricExporter",
           "JsonLinesSpanExporter"]


class JsonLinesFile:
    """A text stream the exporters share, one whole line per write."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def write(self, request: Any) -> None:
        line = request_to_json(request) + "\n"
        with self._lock:
            self.stream.write(line)
            self.stream.flush()


class JsonLinesSpanExporter(SpanExporter):
    def __init__(self, out: JsonLinesFile) -> None:
        self.out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.out.write(encode_spans(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return


class JsonLinesLogExporter(LogRecordExporter):
    def __init__(self, out: JsonLinesFile) -> None:
        self.out = out

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        self.out.write(encode_logs(batch))
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        return


class JsonLinesMetricExporter(MetricExporter):
    def __init__(self, out: JsonLinesFile) -> None:
        super().__init__()
        self.out = out

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        self.out.write(encode_metrics(metrics_data))
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return
