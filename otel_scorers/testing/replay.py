"""Recorded telemetry played into a processor, as if the application had just emitted it.

A file of OTLP JSON lines (what :mod:`otel_scorers.otlp.json_lines` and the Collector's
``file`` exporter write: trace and log requests, in the order they were exported) is read one
line at a time; each span goes to the processor's ``on_end`` (in end order within a line) and
each log record to its log side, so capture, interactions and judging run on the real shapes
a framework produced, without the framework installed. With a ``SimpleSpanProcessor`` behind
the recording, the file holds spans in the order they ended, which is the order an application
would end them.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_scorers.otlp.bodies import from_json
from otel_scorers.otlp.logs import records_of
from otel_scorers.otlp.spans import spans_of

__all__ = ["replay", "requests_in"]


def requests_in(path: str | Path) -> Iterator[ExportTraceServiceRequest | ExportLogsServiceRequest]:
    """The trace and log requests of an OTLP JSON-lines file (gzip or not), in file order."""
    opener: Any = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            keys = json.loads(line).keys()
            if "resourceSpans" in keys:
                yield from_json(line, ExportTraceServiceRequest)
            elif "resourceLogs" in keys:
                yield from_json(line, ExportLogsServiceRequest)


def replay(processor: Any, path: str | Path) -> tuple[int, int]:
    """Play ``path`` into ``processor`` (a :class:`~otel_scorers.ScoringSpanProcessor`):
    spans to ``on_end``, log records to its log side. Returns (spans, records) played."""
    spans = records = 0
    for request in requests_in(path):
        if isinstance(request, ExportLogsServiceRequest):
            for record in records_of(request):
                processor.observe_record(record)
                records += 1
            continue
        for span in sorted(spans_of(request), key=lambda s: s.end_time or 0):
            processor.on_end(span)
            spans += 1
    return spans, records
